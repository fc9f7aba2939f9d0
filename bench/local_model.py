"""Score the embedded default model on scripted prompts with the built-in tools.

    python bench/local_model.py                  # the held-out set (bench/local_model_cases.py)
    python bench/local_model.py --set tuning     # the prompts the rules were tuned on
    python bench/local_model.py --set all

Needs the [local] extra and the SmolLM2 weights. For each prompt, as a task's loop would run it:
the provider's first response (tool calls, or a text answer), the tools run for real (a temporary
workspace holds the files the prompts ask for), then the answer written from their results.
Scored per family:

- right tool, valid arguments: the expected tools were called, with arguments that pass their
  schema and give the expected outputs;
- right answer: the final answer states every expected result (for the time: the tool's output);
- invented: a prompt that needs a tool whose answer claims a result no tool gave: no tool ran and
  the answer does not say so (``raw["no_tool_result"]``), or a failed tool's error is not stated;
- chat prompts must get no tool call;
- deterministic: the chat prompts asked again in reverse order after everything else give the
  same text (the text server's cache then holds other prompts).

Prints one line per prompt, a table per family and the median time per prompt; the figures go to
bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_model_cases import FILES, SETS, Case

from noeta.builtins.tools import BUILTIN_TOOLS
from noeta.protocols.messages import LLMRequest, LLMResponse, Message, TextBlock, ToolResultBlock
from noeta.protocols.tool import ToolContext
from noeta.providers import needle_router
from noeta.providers.local import LocalModelProvider, mentions, stop

TOOLS = {t.name: t for t in BUILTIN_TOOLS}
SCHEMAS = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in BUILTIN_TOOLS]


@dataclass
class Score:
    cases: int = 0
    right_call: int = 0
    right_answer: int = 0
    invented: int = 0
    seconds: list[float] = field(default_factory=list)


async def run_tool(name: str, arguments: dict, call_id: str, workspace: Path) -> tuple[bool, str]:
    ctx = ToolContext(task_id="bench", call_id=call_id, tool_name=name, attempt=1, workspace_dir=str(workspace))
    result = TOOLS[name].invoke(arguments, ctx)
    if inspect.isawaitable(result):
        result = await result
    return result.success, result.output or ""


def _says_no_result(response: LLMResponse) -> bool:
    return bool(response.raw and response.raw.get("no_tool_result"))


async def score_case(provider: LocalModelProvider, case: Case, workspace: Path, score: Score) -> str:
    request = LLMRequest(model=None, messages=[Message("user", [TextBlock(case.prompt)])], tools=SCHEMAS,
                         max_tokens=40 if case.family == "chat" else None)
    first = await provider.complete(request)
    uses = [b for b in first.content if b.type == "tool_use"]
    names = sorted(u.tool_name for u in uses)
    if not case.tools:  # chat: left alone, or not
        ok = not uses
        score.right_call += ok
        score.right_answer += ok
        return f"{'ok ' if ok else 'BAD'} {case.prompt[:60]:<60} -> {names or repr(first.text[:60])}"
    if not uses:
        invented = not _says_no_result(first)
        score.invented += invented
        return f"BAD {case.prompt[:60]:<60} -> (no call) {first.text[:60]!r}{' INVENTED' if invented else ''}"
    outputs = []
    valid = True
    for use in uses:
        valid &= needle_router.valid_arguments(use.arguments, next(s for s in SCHEMAS if s["name"] == use.tool_name))
        success, output = await run_tool(use.tool_name, use.arguments, use.call_id, workspace)
        outputs.append(ToolResultBlock(use.call_id, output, success, None if success else output))
    got = sorted(o.output for o in outputs)
    right_call = valid and names == sorted(case.tools) and (not case.results or got == sorted(case.results))
    score.right_call += right_call
    messages = [*request.messages, Message("assistant", list(uses)), Message("tool", list(outputs))]
    answer = await provider.complete(LLMRequest(model=None, messages=messages, tools=SCHEMAS))
    expected = case.results or tuple(o.output for o in outputs)
    right_answer = right_call and all(mentions(answer.text, r) for r in expected)
    score.right_answer += right_answer
    # A failed tool whose error the answer leaves out reads as a result the model made up.
    failed = [o.output for o in outputs if not o.success]
    score.invented += any(not mentions(answer.text, error) for error in failed)
    own = answer.raw is not None and not answer.raw.get("fallback")
    mark = "ok " if right_call and right_answer else "BAD"
    args = ", ".join(f"{u.tool_name}({u.arguments})" for u in uses)
    return f"{mark} {case.prompt[:60]:<60} -> {args} = {got} => {answer.text[:60]!r}{'' if own else ' (fallback)'}"


async def main(set_name: str) -> int:
    cases = [c for name, cs in SETS.items() if set_name in (name, "all") for c in cs]
    provider = LocalModelProvider()
    workspace = Path(tempfile.mkdtemp(prefix="noeta-bench-"))
    for name, body in FILES.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(body)
    scores: dict[str, Score] = defaultdict(Score)
    chat_texts: dict[str, str] = {}
    try:
        for case in cases:
            score = scores[case.family]
            score.cases += 1
            started = time.perf_counter()
            print(await score_case(provider, case, workspace, score), flush=True)
            score.seconds.append(time.perf_counter() - started)
            if case.family == "chat":
                chat_texts[case.prompt] = (await provider.complete(LLMRequest(
                    model=None, messages=[Message("user", [TextBlock(case.prompt)])], tools=SCHEMAS, max_tokens=40,
                ))).text
        same = 0
        for prompt in reversed(list(chat_texts)):
            again = await provider.complete(LLMRequest(
                model=None, messages=[Message("user", [TextBlock(prompt)])], tools=SCHEMAS, max_tokens=40,
            ))
            same += again.text == chat_texts[prompt]
    finally:
        stop()
    print()
    print(f"set: {set_name}; machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{'family':<11} {'prompts':>7} {'right tool+args':>16} {'right answer':>13} {'invented':>9} {'median s':>9}")
    for family, s in sorted(scores.items()):
        print(f"{family:<11} {s.cases:>7} {s.right_call:>9} ({100 * s.right_call / s.cases:3.0f} %)"
              f" {s.right_answer:>6} ({100 * s.right_answer / s.cases:3.0f} %) {s.invented:>9}"
              f" {statistics.median(s.seconds):>9.2f}")
    every = [t for s in scores.values() for t in s.seconds]
    print(f"all prompts: median {statistics.median(every):.2f} s per prompt")
    print(f"deterministic: {same}/{len(chat_texts)} chat answers identical when asked again in another order")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", choices=[*SETS, "all"], default="held-out")
    raise SystemExit(asyncio.run(main(parser.parse_args().set)))
