"""What a pool thread sees of the activity that handed it a call: the activity itself while the
caller waits, and nothing that reaches the worker once the caller has stopped waiting.

A synchronous call (a provider's ``complete``, a tool) runs on a pool thread in a copy of its
caller's context, so ``activity.heartbeat`` and ``activity.info`` work there (noeta.activities._threads).
temporalio keeps the running activity in that context: its client, its metric meter, and a heartbeat
and info bound to the activity worker, which hold the worker, its client and the Temporal runtime.
A call whose attempt ended (timed out, cancelled: the task went on, to a fallback provider maybe)
runs on, since a thread cannot be stopped, and held all of that for as long as it ran: a script's
``query()`` had returned, and the runtime could not be stopped at exit ("a Temporal runtime of
Noeta's is still referenced 10 s after its owner let it go", noeta.client.runtime), its threads
left running while the interpreter finalized.

So the thread's context holds a copy of temporalio's activity context, and :meth:`Lease.end`, called
when the caller stops waiting, clears the copy's ways to the worker: the call keeps running with the
attempt's info (a snapshot), a heartbeat that goes nowhere, and no client.
"""

from __future__ import annotations

import contextvars
import dataclasses
from typing import Any

from temporalio import activity

#: The variable temporalio keeps the running activity's context in (``activity._Context``).
_ACTIVITY: contextvars.ContextVar[Any] = activity._current_context


def _nowhere(*details: Any) -> None:
    """The heartbeat of a call whose attempt has ended: nobody listens any more."""


class Lease:
    """The thread's copy of its caller's activity context, until :meth:`end`."""

    def __init__(self, leased: Any) -> None:
        self._leased = leased

    def end(self) -> None:
        """The caller stopped waiting: the copy lets go of the worker, the client and the runtime."""
        leased = self._leased
        info = leased.info()
        leased.info = lambda: info
        leased.heartbeat = _nowhere
        leased.client = None
        leased.runtime_metric_meter = None
        leased._metric_meter = None


def lease(context: contextvars.Context) -> Lease | None:
    """Put a copy of the activity in ``context`` (a copy of the caller's, for a thread) in place of
    temporalio's own; None when ``context`` is not an activity's."""
    live = context.get(_ACTIVITY)
    if live is None:
        return None
    leased = dataclasses.replace(live)
    context.run(_ACTIVITY.set, leased)
    return Lease(leased)
