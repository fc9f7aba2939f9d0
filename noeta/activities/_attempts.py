"""Counting a call's attempts: which failures use up its retries, which are waits, which are lost.

Temporal records only an activity's last failure in history. Each attempt therefore reads the
failures of the attempts before it from the heartbeat details (which survive retries), and an
attempt that fails heartbeats the extended list before raising. The list ends up in the final
result (``retried``) or in the final failure's details, so every attempt is accounted for. A local
activity (a local tool) cannot heartbeat: its worker keeps the list in memory instead
(noeta.activities._local_attempts).

With an :class:`~noeta.protocols.task.AttemptBudget` (every call the current workflow schedules)
the worker, not Temporal's ``maximum_attempts``, decides when a call has had enough:

- a **failure** (5xx, a timeout, ``ToolRetryableError``...) counts against ``max_retries``;
- a **wait** (HTTP 429, this worker's provider limiter, no free sync-tool thread) does not: its
  delay counts against ``max_wait_seconds``, so a burst beyond a provider's quota queues instead
  of failing;
- a **lost** attempt (no failure recorded: its worker died, or its completion never reached the
  server) counts against MAX_LOST_ATTEMPTS, so killing workers does not turn a call into a failure;
- a **store** failure (the call finished, the content store could not take its output: full,
  unreachable, refused) counts against ``max_retries`` on its own; the output is kept and only the
  write is retried (see noeta.activities._store_writes), so the call never runs again for it;
- an **outage** (the content store cannot be reached: PostgreSQL stopped, a partition) does not
  count against ``max_retries``: the write (or read) is tried again every few seconds (1 s × 2ⁿ,
  at most OUTAGE_MAX_DELAY_SECONDS) while the delays add up to at most ``max_outage_seconds``
  (the task's ``store_outage_wait_seconds``); past it the call fails with the ContentStoreError.

The worker sets every retry's delay itself (``next_retry_delay``): the budget's backoff (the
kind's ActivityOptions; 1 s × 2ⁿ up to 60 s by default) over the failures alone, or the
provider's ``retry-after``.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from noeta.activities._local_attempts import earlier_local_failures, forget, remember
from noeta.errors import NoetaError, ProviderError, WorkerBusyError
from noeta.protocols.attempts import MAX_LOST_ATTEMPTS, AttemptBudget, AttemptFailure, AttemptKind, RetryBackoff
from noeta.security.scrub import scrub

LOST_ATTEMPT = "the attempt ended without a result (it timed out or its worker was lost)"
#: The error type of a lost attempt, and of the failure that gives up after too many (no Noeta
#: error is raised for either: nothing was caught).
LOST_ATTEMPT_TYPE = "Timeout"
DEFAULT_BACKOFF = RetryBackoff()
#: Writes of a finished output retried when the call has no attempt budget (the task default).
DEFAULT_STORE_RETRIES = 3
#: The longest pause between two tries of an unreachable store: it is usually back within seconds.
OUTAGE_MAX_DELAY_SECONDS = 5.0
#: How long a call with no attempt budget waits for an unreachable store (the task default).
DEFAULT_OUTAGE_SECONDS = AttemptBudget(0).max_outage_seconds


def earlier_failures() -> list[AttemptFailure]:
    info = activity.info()
    recorded: list[AttemptFailure] = []
    if info.heartbeat_details and isinstance(info.heartbeat_details[0], list):
        recorded = [AttemptFailure(**item) for item in info.heartbeat_details[0]]
    seen = {f.attempt for f in recorded}
    lost = [AttemptFailure(n, LOST_ATTEMPT, LOST_ATTEMPT_TYPE, kind="lost") for n in range(1, info.attempt) if n not in seen]
    return sorted(recorded + lost, key=lambda f: f.attempt)


def as_details(failures: list[AttemptFailure]) -> list[dict[str, Any]]:
    return [asdict(f) for f in failures]


def backoff(failures: int, budget: AttemptBudget | None = None) -> float:
    """The delay before the retry that follows the ``failures``-th failure, on ``budget``'s backoff."""
    chosen = budget.backoff if budget is not None and budget.backoff is not None else DEFAULT_BACKOFF
    return chosen.delay(failures)


def kind_of(err: NoetaError) -> AttemptKind:
    if isinstance(err, ProviderError) and err.status == 429:
        return "wait"
    if isinstance(err, WorkerBusyError):
        return "wait"
    return "failure"


def error_details(err: NoetaError, failures: list[AttemptFailure], exhausted: str | None = None) -> dict[str, Any]:
    details = {k: scrub(v) if isinstance(v, str) else v for k, v in err.to_details().items()}
    details["attempt_failures"] = as_details(failures)
    if exhausted is not None:
        details["exhausted"] = exhausted
    return details


class AttemptLedger:
    """The current attempt of one activity: its earlier attempts and what a failure now costs."""

    def __init__(self, budget: AttemptBudget | None) -> None:
        self.budget = budget
        self.started = time.monotonic()
        """When this attempt started (``time.monotonic``)."""
        info = activity.info()
        self.attempt = info.attempt
        self.local = info.is_local
        """A local activity (a local tool): its earlier attempts are kept in this worker's memory."""
        self.earlier = earlier_local_failures() if self.local else earlier_failures()

    def _keep(self, failures: list[AttemptFailure]) -> None:
        """Hand ``failures`` to the next attempt: in the heartbeat details, or (local) in memory."""
        if self.local:
            remember(failures)
        else:
            activity.heartbeat(as_details(failures))

    def done(self) -> None:
        """The call returned: a local activity's remembered attempts are dropped."""
        if self.local:
            forget()

    def count(self, kind: AttemptKind) -> int:
        return sum(1 for f in self.earlier if f.kind == kind)

    def waited(self) -> float:
        return sum(f.delay or 0.0 for f in self.earlier if f.kind == "wait")

    def check_lost(self) -> None:
        """Give up before running anything once too many attempts were lost."""
        lost = self.count("lost")
        if self.budget is None or lost <= MAX_LOST_ATTEMPTS:
            return
        message = f"{lost} attempts of this call were lost (workers killed or unreachable); giving up"
        raise ApplicationError(
            message,
            {"message": message, "attempt_failures": as_details(self.earlier), "exhausted": "lost"},
            type=LOST_ATTEMPT_TYPE,
            non_retryable=True,
        )

    def store_failed(self, err: NoetaError) -> float | None:
        """Record that this attempt's finished output could not be stored (heartbeated, so a later
        attempt counts it too): the delay before the write is tried again, or None once the writes
        failed more than ``max_retries`` times (``store_gave_up`` is then the error to raise)."""
        failed = self.count("store") + 1
        retries = self.budget.max_retries if self.budget is not None else DEFAULT_STORE_RETRIES
        delay = None if failed > retries else backoff(failed, self.budget)
        failure = AttemptFailure(self.attempt, scrub(str(err)), type(err).__name__, None, "store", delay)
        self.earlier = [*self.earlier, failure]
        self._keep(self.earlier)
        return delay

    def outage(self, err: NoetaError) -> float | None:
        """Record that the content store could not be reached (``outage``, heartbeated): the delay
        before trying it again, or None once the waits for it would pass ``max_outage_seconds``
        (``store_gave_up`` is then the error to raise). Never counted against ``max_retries``."""
        waits = [f.delay or 0.0 for f in self.earlier if f.kind == "outage"]
        delay = min(OUTAGE_MAX_DELAY_SECONDS, DEFAULT_BACKOFF.delay(len(waits) + 1))
        most = self.budget.max_outage_seconds if self.budget is not None else DEFAULT_OUTAGE_SECONDS
        left = most - sum(waits)
        found = min(delay, left) if left > 0 else None
        failure = AttemptFailure(self.attempt, scrub(str(err)), type(err).__name__, None, "outage", found)
        self.earlier = [*self.earlier, failure]
        self._keep(self.earlier)
        return found

    def store_gave_up(self, err: NoetaError) -> ApplicationError:
        """The final error of a call whose output the store would not take (``exhausted``: "store")."""
        return ApplicationError(
            scrub(str(err)), error_details(err, self.earlier, "store"), type=type(err).__name__, non_retryable=True
        )

    def failed(self, err: NoetaError, kind: AttemptKind | None = None) -> ApplicationError:
        """Record this attempt's failure (heartbeat, for the next attempt) and the error to raise:
        retried after the delay the ledger chose, or final."""
        kind = kind or kind_of(err)
        retryable = err.retryable if isinstance(err, ProviderError) else not err.non_retryable
        retry_after = err.retry_after if isinstance(err, ProviderError) else None
        delay: float | None = None
        exhausted: str | None = None
        if retryable and self.budget is None:  # Temporal counts the attempts
            delay = retry_after
        elif retryable and self.budget is not None:
            if kind == "wait":
                delay = retry_after if retry_after is not None else backoff(self.count("wait") + 1, self.budget)
                if self.waited() + delay > self.budget.max_wait_seconds:
                    exhausted = "rate_limit"
            else:
                counted: AttemptKind = "store" if kind == "store" else "failure"
                failed = self.count(counted) + 1
                delay = retry_after if retry_after is not None else backoff(failed, self.budget)
                if failed > self.budget.max_retries:
                    exhausted = "store" if kind == "store" else "failures"
        failure = AttemptFailure(self.attempt, scrub(str(err)), type(err).__name__, retry_after, kind, delay)
        failures = [*self.earlier, failure]
        final = not retryable or exhausted is not None
        if final and self.local:
            forget()
        else:
            self._keep(failures)
        return ApplicationError(
            scrub(str(err)),
            error_details(err, failures, exhausted),
            type=type(err).__name__,
            non_retryable=final,
            next_retry_delay=None if final or delay is None else timedelta(seconds=delay),
        )
