"""The floor's activities and the types they exchange with its workflow (bench/baseline_loop.py).

Kept apart from the workflow so the workflow imports them passed through the sandbox, as
Temporal's guidance for hand-written workflows says: a new workflow instance then re-runs only the
small workflow module, not these definitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from workload import final_answer, tool_output

WORKFLOW_NAME = "BenchBaselineLoop"

# The same retry shape and timeouts as Noeta's defaults (max_retries=3, 300 s per attempt).
RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=4,
)
ATTEMPT_TIMEOUT = timedelta(seconds=300)
# A local attempt must end well inside the 10 s workflow task; Noeta bounds its local calls alike.
LOCAL_ATTEMPT_TIMEOUT = timedelta(seconds=5)


@dataclass(frozen=True)
class LoopInput:
    steps: int
    output_bytes: int
    heartbeat_seconds: float | None = None
    """The activities' heartbeat timeout (the bench's --heartbeat-seconds); None: none."""
    padding: int = 0
    """Bytes of filler in each activity's input and output (the bench's --floor-padding): a
    calibration, to see what a step's extra history bytes cost the server."""
    model_reads_results: bool = False
    """Each model call gets the output of the tool call before it, as any agent's model must see
    its tool results (the bench's "baseline-reads-results" floor); False: the model counts steps."""
    local: bool = False
    """Both calls as local activities (the bench's "baseline-local" floor): the fastest loop an
    expert writes on Temporal, with no record of finished steps (a lost workflow task runs its
    chain of local calls again)."""


@dataclass(frozen=True)
class ModelInput:
    task_id: str
    steps: int
    done: int
    output_bytes: int
    padding: str = ""
    tool_result: str | None = None
    """The previous tool call's output, when the loop gives the model its tool results."""


@dataclass(frozen=True)
class ToolCall:
    call_id: str
    arguments: dict[str, int]


@dataclass(frozen=True)
class ModelReply:
    tool_call: ToolCall | None = None
    text: str | None = None
    padding: str = ""


@dataclass(frozen=True)
class ToolInput:
    task_id: str
    call: ToolCall
    padding: str = ""


@dataclass(frozen=True)
class LoopResult:
    answer: str
    steps: int


@activity.defn(name="bench.model")
async def model(inp: ModelInput) -> ModelReply:
    """The "model": a tool call while fewer than ``steps`` tools have run, then a final answer.
    Given tool results, it reads each: the one of the call it made last."""
    if inp.tool_result is not None and not inp.tool_result.startswith(f"{inp.task_id}/call-{inp.done - 1}\n"):
        raise ApplicationError(f"not the output of call-{inp.done - 1}: {inp.tool_result[:80]!r}", non_retryable=True)
    if inp.done < inp.steps:
        call = ToolCall(f"call-{inp.done}", {"bytes": inp.output_bytes, "step": inp.done})
        return ModelReply(tool_call=call, padding=inp.padding)
    return ModelReply(text=final_answer(inp.done), padding=inp.padding)


@activity.defn(name="bench.tool")
async def tool(inp: ToolInput) -> str:
    return tool_output(f"{inp.task_id}/{inp.call.call_id}", inp.call.arguments["bytes"]) + inp.padding
