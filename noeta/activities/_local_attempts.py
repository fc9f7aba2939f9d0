"""The earlier attempts of a local activity (a local tool's call), kept in this worker's memory.

An ordinary activity carries its failed attempts to the next attempt in its heartbeat details. A
local activity cannot heartbeat: its attempts are all retried by the worker that runs the
workflow, so that worker remembers them here, by run and activity id, until the call ends. An
attempt it has no record of (made before this worker took the workflow over, or cut off by its
start-to-close timeout) is counted as a failure: a local activity's attempt number only grows
when an attempt failed, never when a worker was lost (the workflow task times out and the next
worker starts the call from its first attempt).
"""

from __future__ import annotations

from collections import OrderedDict

from temporalio import activity

from noeta.protocols.attempts import AttemptFailure

#: The attempt that left no record (see the module docstring).
UNRECORDED = "the attempt ended without a result (it timed out, or ran on a worker that was lost)"
UNRECORDED_TYPE = "Timeout"
#: Calls remembered at most: a call whose workflow moved on without ending it (a cancelled task) is
#: dropped when this many newer ones came after it.
MAX_REMEMBERED_CALLS = 10_000

_failures: OrderedDict[str, list[AttemptFailure]] = OrderedDict()


def _key() -> str:
    info = activity.info()
    return f"{info.workflow_run_id}/{info.activity_id}"


def earlier_local_failures() -> list[AttemptFailure]:
    """The failures of this local activity's earlier attempts, one per attempt before this one."""
    attempt = activity.info().attempt
    kept = [f for f in _failures.get(_key(), []) if f.attempt < attempt]
    seen = {f.attempt for f in kept}
    missing = [AttemptFailure(n, UNRECORDED, UNRECORDED_TYPE, kind="failure") for n in range(1, attempt) if n not in seen]
    return sorted(kept + missing, key=lambda f: f.attempt)


def remember(failures: list[AttemptFailure]) -> None:
    """Keep ``failures`` (this attempt's included) for the next attempt of this local activity."""
    key = _key()
    _failures[key] = list(failures)
    _failures.move_to_end(key)
    while len(_failures) > MAX_REMEMBERED_CALLS:
        _failures.popitem(last=False)


def forget() -> None:
    """The call ended (returned, or failed for good): nothing more to remember for it."""
    _failures.pop(_key(), None)


__all__ = ["MAX_REMEMBERED_CALLS", "UNRECORDED", "earlier_local_failures", "forget", "remember"]
