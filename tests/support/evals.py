"""A 10-case eval: scripted providers that answer 7 (or, fixed, 9) cases right, a counted
``search`` tool, and the dataset as JSONL."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from noeta.protocols.messages import LLMRequest, LLMResponse, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool

CASES = 10
#: Cases the plain provider answers wrong; the fixed one gets the first two of them right.
WRONG = {8, 9, 10}
FIXED = {8, 9}
#: The case whose tool path differs (lookup instead of search; its answer is still right).
DETOUR = 3


class Counter:
    """Counts calls across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self) -> None:
        with self._lock:
            self.value += 1


TOOL_CALLS = Counter()


def _lookup(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    TOOL_CALLS.add()
    return ToolResult(success=True, output=f"facts about {arguments.get('q')}")


_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
search = tool(name="search", version="1", input_schema=_SCHEMA, description="Search.")(_lookup)
lookup = tool(name="lookup", version="1", input_schema=_SCHEMA, description="Look up.")(_lookup)


def dataset_rows() -> list[dict[str, Any]]:
    return [
        {"id": f"q{n}", "goal": f"What is the code of item {n}?", "expected": f"code-{n}", "expected_tools": ["search"],
         "tags": ["even" if n % 2 == 0 else "odd"]}
        for n in range(1, CASES + 1)
    ]


def write_dataset(folder: Path) -> Path:
    path = folder / "cases.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in dataset_rows()))
    return path


def _case_number(request: LLMRequest) -> int:
    for message in request.messages:
        for block in message.content:
            if isinstance(block, TextBlock):
                found = re.search(r"item (\d+)", block.text)
                if found:
                    return int(found.group(1))
    raise AssertionError("no case in the request")


def scripted(wrong: set[int]) -> FakeLLMProvider:
    """Calls ``search`` (``lookup`` in case DETOUR), then answers ``code-N`` (``unknown`` for ``wrong``)."""
    counter = Counter()

    def respond(request: LLMRequest) -> LLMResponse:
        counter.add()
        n = _case_number(request)
        answered = any(isinstance(b, ToolResultBlock) for m in request.messages for b in m.content)
        usage = Usage(uncached=100, output=10)
        if not answered:
            name = "lookup" if n == DETOUR else "search"
            return LLMResponse("tool_use", [ToolUseBlock(f"c{n}", name, {"q": f"item {n}"})], usage)
        return LLMResponse("end_turn", [TextBlock("unknown" if n in wrong else f"The code is code-{n}.")], usage)

    provider = FakeLLMProvider(responder=respond)
    provider.calls = counter  # type: ignore[attr-defined]
    return provider


#: For ``noeta eval --provider tests.support.evals:plain`` / ``fixed``.
plain = scripted(WRONG)
fixed = scripted(WRONG - FIXED)


def judge(score: float = 0.8) -> FakeLLMProvider:
    """A judge that gives every answer ``score``, with usage to be priced."""
    return FakeLLMProvider(responder=lambda request: LLMResponse(
        "end_turn", [TextBlock(json.dumps({"score": score, "reason": "reads right"}))], Usage(uncached=1000, output=100),
    ))


def eval_options() -> Any:
    """The agent under evaluation: the two tools, a model name."""
    from noeta.sdk import Options

    return Options(allowed_tools=[search, lookup], model="gpt-test", max_turns=5)


options = eval_options()
