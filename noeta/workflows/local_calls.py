"""One call as a local activity, as both local tools and local model calls run: on the worker that
runs the workflow, recorded as one marker, failing for good with an ActivityError as an ordinary
activity does (so the callers' error handling is the same for both)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

T = TypeVar("T")


async def execute_local_call(
    name: str,
    inp: Any,
    result_type: type[T],
    seconds: float,
    retry: RetryPolicy,
    activity_id: str,
    summary: str,
    schedule_to_close: float | None = None,
) -> T:
    """Activity ``name`` as a local activity of ``seconds`` per attempt (a local tool's or model
    call's); a call that failed for good raises ActivityError, as the ordinary activity's does."""
    try:
        out: T = await workflow.execute_local_activity(
            name,
            inp,
            result_type=result_type,
            start_to_close_timeout=timedelta(seconds=seconds),
            schedule_to_close_timeout=None if schedule_to_close is None else timedelta(seconds=schedule_to_close),
            retry_policy=retry,
            activity_id=activity_id,
            summary=summary,
        )
    except ActivityError:
        raise
    except FailureError as err:  # a local activity's failure reaches the workflow unwrapped
        raise ActivityError(
            "local activity failed", scheduled_event_id=0, started_event_id=0, identity="",
            activity_type=name, activity_id=activity_id, retry_state=None,
        ) from err
    return out


__all__ = ["execute_local_call"]
