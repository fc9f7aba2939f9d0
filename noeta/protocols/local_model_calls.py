"""Model calls as local activities (``Options(model_local_activity=True)``): each model call runs on
the worker that runs the task's workflow and is recorded as one marker event, instead of an
activity's three events, a server round trip and a workflow task of its own.

For fast models only (a small or nearby model, short answers). A local activity cannot heartbeat
and holds its workflow task while it runs: every ~8 s of a call the worker reports the workflow
task as still alive, one more workflow task and three events each time, and a killed worker is
noticed when its workflow task times out (10 s), after which the call runs again from its first
attempt on another worker. So an attempt is bounded: LOCAL_MODEL_TIMEOUT_SECONDS unless the task
sets one (``model_activity.start_to_close_seconds``), never more than
LOCAL_MODEL_MAX_TIMEOUT_SECONDS. The marker holds no input: its activity id carries what the event
log shows of the call (:func:`model_call_activity_id`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from noeta.protocols.activity_io import CallModelInput
from noeta.protocols.task_settings import MODEL_TIMEOUT_SECONDS

#: A local model call's attempt timeout when the task sets none.
LOCAL_MODEL_TIMEOUT_SECONDS = 30.0
#: The longest attempt a local model call may have: slower models belong in an ordinary activity.
LOCAL_MODEL_MAX_TIMEOUT_SECONDS = 120.0
#: Every this-many-th model call (by the task's turn number) of a task with local calls is an
#: ordinary activity, which ends the workflow task and reports the markers before it. Without it a
#: fast model's whole task is one workflow task: its markers reach the server in one completion
#: (measured: 400 steps, 533 KB; the server refuses a message over 4 MB) and the run never sees its
#: history grow, so it never continues as new. 100 calls are about 130 KB, and a task passes
#: ``max_history_events`` by at most one report's markers (about 200 events when each step calls one
#: tool); a slower model reports sooner anyway (the worker reports a workflow task that runs ~8 s,
#: its timeout's 80 %). Each report costs an activity and a workflow task: at the earlier 20 a
#: 50-step task had 3 workflow tasks and 7 billable actions, now 1 and 3 (bench/RESULTS.md). (A 1 ms
#: timer did the same at 0.8 s a report on the dev server, whose timers fire about a second late; an
#: activity is dispatched with the workflow task's completion.) Part of the command sequence: a
#: change needs a patch (PATCH_LOCAL_REPORTS).
LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK = 100
#: The report interval of tasks recorded before PATCH_LOCAL_REPORTS.
EARLIER_LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK = 20


def local_model_attempt_seconds(start_to_close_seconds: float | None) -> float:
    """A local model call's attempt timeout: the task's ``model_activity.start_to_close_seconds``,
    else LOCAL_MODEL_TIMEOUT_SECONDS (the deprecated ``model_timeout_seconds`` is not read: its
    default, 300 s, is over the limit, and another value is refused by local_model_problem)."""
    return start_to_close_seconds if start_to_close_seconds is not None else LOCAL_MODEL_TIMEOUT_SECONDS


def local_model_problem(settings: Any) -> str | None:
    """What keeps ``settings`` (an Options, a TaskInput) from running its model calls as local
    activities, or None (also when it does not ask to)."""
    if not getattr(settings, "model_local_activity", False):
        return None
    seconds = settings.model_activity.start_to_close_seconds
    if seconds is None and settings.model_timeout_seconds != MODEL_TIMEOUT_SECONDS:
        # Never read for a local call: refused rather than silently replaced by the local default.
        return (
            "model_local_activity does not read the deprecated model_timeout_seconds: set "
            "model_activity=ActivityOptions(start_to_close_seconds=...) instead"
        )
    if seconds is not None and seconds > LOCAL_MODEL_MAX_TIMEOUT_SECONDS:
        return (
            f"model_activity.start_to_close_seconds must be at most {LOCAL_MODEL_MAX_TIMEOUT_SECONDS:g} s "
            f"with model_local_activity (a local activity holds its workflow task), got {seconds:g}; "
            "run slower models as ordinary activities"
        )
    return None


@dataclass(frozen=True, slots=True)
class ModelCallStart:
    """What the event log shows of a model call as it starts (ProviderCallStarted); for a local
    call, all that its marker says of it (its activity id)."""

    turn: int
    provider: str
    model: str | None
    messages_appended: int

    @classmethod
    def of(cls, request: CallModelInput) -> ModelCallStart:
        """The start of the call ``request`` asks for."""
        return cls(request.turn, request.provider, request.model, len(request.append))


def model_call_activity_id(call: ModelCallStart) -> str:
    """The local activity id of a model call: the call's facts as compact JSON (unique per run: the
    turn)."""
    return json.dumps(
        [call.turn, call.provider, call.model, call.messages_appended], ensure_ascii=False, separators=(",", ":")
    )


def model_call_start(activity_id: str) -> ModelCallStart | None:
    """The facts :func:`model_call_activity_id` put in ``activity_id``, or None for another id."""
    try:
        turn, provider, model, appended = json.loads(activity_id)
    except (ValueError, TypeError):
        return None
    if not isinstance(turn, int) or not isinstance(provider, str) or not isinstance(appended, int):
        return None
    return ModelCallStart(turn, provider, model if isinstance(model, str) else None, appended)


__all__ = [
    "EARLIER_LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK",
    "LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK",
    "LOCAL_MODEL_MAX_TIMEOUT_SECONDS",
    "LOCAL_MODEL_TIMEOUT_SECONDS",
    "ModelCallStart",
    "local_model_attempt_seconds",
    "local_model_problem",
    "model_call_activity_id",
    "model_call_start",
]
