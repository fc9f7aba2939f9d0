"""Score the embedded default model on scripted prompts with the built-in tools.

    python bench/local_model.py            # needs the [local] extra + the SmolLM2 weights

For each prompt: what the router proposed (schema-valid? the expected tools?), the tools run for
real (a temporary workspace holds the files the prompts ask for), then the final answer written
from their results: does the model's own text state every result, and does the answer the provider
returns (after its fallback) do so. Chit-chat prompts must get no tool call. Prints one line per
prompt and a summary; the figures go to bench/RESULTS.md.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from noeta.builtins.tools import BUILTIN_TOOLS  # noqa: E402
from noeta.protocols.messages import (  # noqa: E402
    LLMRequest,
    Message,
    TextBlock,
    ToolResultBlock,
)
from noeta.protocols.tool import ToolContext  # noqa: E402
from noeta.providers import needle_router  # noqa: E402
from noeta.providers.local import LocalModelProvider, mentions, stop  # noqa: E402


@dataclass(frozen=True)
class Case:
    prompt: str
    tools: tuple[str, ...]
    """Expected tool names, in any order (empty: no tool should be called)."""
    results: tuple[str, ...] = ()
    """Expected outputs of those tools (right arguments); empty: not checked (e.g. the time)."""


FILES = {
    "notes.txt": "Buy milk. Call Ana at 5pm.",
    "todo.txt": "Ship the release on Friday.",
    "config.ini": "[server]\nport = 8080",
}

CASES = [
    Case("What is 37 * 91?", ("calculator",), ("3367",)),
    Case("Compute 1234 + 4321.", ("calculator",), ("5555",)),
    Case("What is 2 to the power of 10?", ("calculator",), ("1024",)),
    Case("Calculate 144 / 12.", ("calculator",), ("12",)),
    Case("What is (15 + 27) * 3?", ("calculator",), ("126",)),
    Case("What is 999 - 333?", ("calculator",), ("666",)),
    Case("Multiply 25 by 4.", ("calculator",), ("100",)),
    Case("How many words are in 'the quick brown fox jumps over the lazy dog'?", ("word_count",), ("9",)),
    Case("Count the words in: durable execution survives crashes", ("word_count",), ("4",)),
    Case("How many words does this sentence have: 'Temporal keeps workflow history forever'", ("word_count",), ("5",)),
    Case('Word count of "one two three"', ("word_count",), ("3",)),
    Case("What time is it?", ("current_time",)),
    Case("What's the current date and time in UTC?", ("current_time",)),
    Case("Tell me the time now.", ("current_time",)),
    Case("Read the file notes.txt", ("read_file",), (FILES["notes.txt"],)),
    Case("Show me what is in todo.txt", ("read_file",), (FILES["todo.txt"],)),
    Case("Open config.ini and show its contents", ("read_file",), (FILES["config.ini"],)),
    Case("Wait for 2 seconds.", ("wait",), ("waited 2 seconds",)),
    Case("Please wait 1 second.", ("wait",), ("waited 1 seconds",)),
    Case("What is 37 * 91, and what time is it?", ("calculator", "current_time")),
    Case("How many words are in 'Durable agents survive crashes', and what is 12 * 12?",
         ("word_count", "calculator"), ("4", "144")),
    Case("What is 7 times 8?", ("calculator",), ("56",)),
]
CHAT = ["Hello!", "Tell me a joke.", "Thanks, that's all.", "Write one sentence about durable execution."]

TOOLS = {t.name: t for t in BUILTIN_TOOLS}
SCHEMAS = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in BUILTIN_TOOLS]


async def run_tool(name: str, arguments: dict, call_id: str, workspace: Path) -> tuple[bool, str]:
    ctx = ToolContext(task_id="bench", call_id=call_id, tool_name=name, attempt=1, workspace_dir=str(workspace))
    result = TOOLS[name].invoke(arguments, ctx)
    if inspect.isawaitable(result):
        result = await result
    return result.success, result.output or ""


async def main() -> int:
    provider = LocalModelProvider()
    workspace = Path(tempfile.mkdtemp(prefix="noeta-bench-"))
    for name, body in FILES.items():
        (workspace / name).write_text(body)
    proposed = valid = right_tool = right_args = args_checked = own_mentions = final_mentions = answered = 0
    route_seconds: list[float] = []
    answer_seconds: list[float] = []
    try:
        for case in CASES:
            raw = await asyncio.to_thread(needle_router.raw_route, case.prompt, SCHEMAS)
            for call in raw.get("function_calls") or []:
                proposed += 1
                tool = next((t for t in SCHEMAS if t["name"] == call.get("name")), None)
                valid += tool is not None and needle_router.valid_arguments(call.get("arguments"), tool)
            request = LLMRequest(model=None, messages=[Message("user", [TextBlock(case.prompt)])], tools=SCHEMAS)
            started = time.perf_counter()
            response = await provider.complete(request)
            route_seconds.append(time.perf_counter() - started)
            uses = [b for b in response.content if b.type == "tool_use"]
            names = sorted(u.tool_name for u in uses)
            tool_ok = names == sorted(case.tools)
            right_tool += tool_ok
            line = f"{'ok ' if tool_ok else 'BAD'} {case.prompt[:58]:<58} -> {', '.join(names) or '(no call)'}"
            if not uses:
                print(line + f"  [{response.text[:50]!r}]")
                continue
            outputs = []
            for use in uses:
                success, output = await run_tool(use.tool_name, use.arguments, use.call_id, workspace)
                outputs.append(ToolResultBlock(use.call_id, output, success, None if success else output))
            if case.results:
                args_checked += 1
                right_args += tool_ok and sorted(case.results) == sorted(o.output for o in outputs)
            messages = [*request.messages, Message("assistant", list(uses)), Message("tool", list(outputs))]
            started = time.perf_counter()
            answer = await provider.complete(LLMRequest(model=None, messages=messages, tools=SCHEMAS))
            answer_seconds.append(time.perf_counter() - started)
            answered += 1
            results = [str(o.output) for o in outputs if o.output]
            own = answer.raw is not None and not answer.raw["fallback"]
            own_mentions += own
            final_mentions += all(mentions(answer.text, r) for r in results)
            print(line + f"  {[o.output for o in outputs]} => {answer.text[:70]!r}{'' if own else ' (fallback)'}")
        false_calls = 0
        for prompt in CHAT:
            response = await provider.complete(
                LLMRequest(model=None, messages=[Message("user", [TextBlock(prompt)])], tools=SCHEMAS, max_tokens=40)
            )
            called = [b.tool_name for b in response.content if b.type == "tool_use"]
            false_calls += bool(called)
            print(f"{'BAD' if called else 'ok '} {prompt:<58} -> {called or response.text[:60]!r}")
    finally:
        stop()
    n = len(CASES)
    print()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"prompts with tools: {n}; chit-chat prompts: {len(CHAT)}")
    print(f"schema-valid tool calls (router's raw proposals): {valid}/{proposed} = {100 * valid / max(proposed, 1):.0f} %")
    print(f"right tool(s) after the confidence gate: {right_tool}/{n} = {100 * right_tool / n:.0f} %")
    print(f"right arguments (tool output as expected): {right_args}/{args_checked}")
    print(f"answer from the text model states every result: {own_mentions}/{answered}")
    print(f"final answer states every result (with fallback): {final_mentions}/{answered}")
    print(f"false tool calls on chit-chat: {false_calls}/{len(CHAT)}")
    print(f"route step median {sorted(route_seconds)[len(route_seconds) // 2]:.2f} s; "
          f"answer step median {sorted(answer_seconds)[len(answer_seconds) // 2]:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
