"""A counting tool and deterministic providers for the export and replay tests (module level: the
CLI loads a provider by ``package.module:attribute``)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from noeta.cli import run
from noeta.protocols.messages import LLMRequest, LLMResponse, TextBlock, ToolResultBlock
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from tests.support.scripts import call, say

RUNS: list[str] = []
"""One entry per time the count tool ran (its idempotency key)."""
_lock = threading.Lock()


@tool(
    name="count",
    version="1",
    input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    description="Count to n.",
)
def count(arguments: dict, ctx: ToolContext) -> ToolResult:
    with _lock:
        RUNS.append(ctx.idempotency_key)
    return ToolResult(success=True, output=f"counted {arguments['n']}")


def goal_of(request: LLMRequest) -> str:
    first = request.messages[0]
    return "".join(b.text for b in first.content if isinstance(b, TextBlock))


def results_in(request: LLMRequest) -> int:
    return sum(isinstance(b, ToolResultBlock) for m in request.messages for b in m.content)


def three_counts(request: LLMRequest) -> LLMResponse:
    """Three count calls, one per turn, then an answer naming the goal: a function of the request
    alone, so asking a recorded turn again gives the recorded decision."""
    done = results_in(request)
    if done < 3:
        return call((f"c{done + 1}", "count", {"n": done + 1}))
    return say(f"counted three for {goal_of(request)}")


def one_change(request: LLMRequest) -> LLMResponse:
    """three_counts, except in the task whose goal is "job 7": its second call counts to 99."""
    if goal_of(request) == "job 7" and results_in(request) == 1:
        return call(("c2", "count", {"n": 99}))
    return three_counts(request)


same = FakeLLMProvider(responder=three_counts)
changed = FakeLLMProvider(responder=one_change)


async def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the ``noeta`` command line in this process: (exit code, stdout, stderr), no traceback."""
    capsys.readouterr()
    code = await asyncio.to_thread(run, list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err
