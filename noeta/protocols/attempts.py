"""How a model or tool call's attempts are counted: what one failed attempt records, what a call
may spend on retries, and the safety net Temporal keeps under the worker's own count (the
worker's side is noeta.activities._attempts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: Attempts of one call whose worker was lost (killed, partitioned, or its completion never reached
#: the server) before they count as a failure of the call: such an attempt is not the step's fault.
MAX_LOST_ATTEMPTS = 10
#: Attempts Temporal may make of one call before it gives up by itself: a safety net only, the
#: worker's attempt ledger (noeta.activities._attempts) decides first. Rate-limit waits each take
#: an attempt, so the net leaves room for many.
SAFETY_NET_EXTRA_ATTEMPTS = 1000

AttemptKind = Literal["failure", "wait", "lost", "store", "outage"]
"""``failure``: the call failed (counts against ``max_retries``); ``wait``: it was rate-limited or
found no free thread (counts against ``rate_limit_wait_seconds``); ``lost``: its worker was lost
(counts against MAX_LOST_ATTEMPTS); ``store``: the call finished but the content store could not
take its output (the output is kept and only the write is retried; counts against
``max_retries`` on its own, never as a lost worker); ``outage``: the content store could not be
reached (PostgreSQL down, a partition), so the write or read waits for it and is tried again
(counts against ``store_outage_wait_seconds``, never ``max_retries``)."""


@dataclass(frozen=True, slots=True)
class AttemptFailure:
    """One failed attempt of a retried activity, carried to the next attempt in heartbeat details."""

    attempt: int
    error: str
    error_type: str | None = None
    retry_after: float | None = None
    kind: AttemptKind = "failure"
    delay: float | None = None
    """Seconds the worker asked Temporal to wait before the next attempt."""


@dataclass(frozen=True, slots=True)
class RetryBackoff:
    """The delay before a call's next attempt: ``initial_seconds`` after its first failure (or
    wait), times ``coefficient`` after each further one, at most ``max_seconds``."""

    initial_seconds: float = 1.0
    coefficient: float = 2.0
    max_seconds: float = 60.0

    def delay(self, failures: int) -> float:
        """The delay before the retry that follows the ``failures``-th failure."""
        try:
            delay = self.initial_seconds * self.coefficient ** max(0, failures - 1)
        except OverflowError:  # far past the cap
            return self.max_seconds
        return min(self.max_seconds, delay)


@dataclass(frozen=True, slots=True)
class AttemptBudget:
    """What one model or tool call may spend on retries; the worker's attempt ledger enforces it."""

    max_retries: int
    """Failed attempts allowed after the first (rate-limit waits and lost workers not counted)."""
    max_wait_seconds: float = 600.0
    """Total time the call may wait on rate limits (429 / retry-after, the worker's limiter)."""
    backoff: RetryBackoff | None = None
    """The worker's delays between attempts (None: the default, 1 s × 2ⁿ up to 60 s). Set only
    when the kind's ActivityOptions change it: a default task's steps stay as small as before."""
    max_outage_seconds: float = 120.0
    """Total time the call may wait for an unreachable content store (``store_outage_wait_seconds``)."""


def attempts_cap(max_retries: int) -> int:
    """Temporal's ``maximum_attempts`` for a call with a ledger (a safety net, see above)."""
    return max_retries + 1 + MAX_LOST_ATTEMPTS + SAFETY_NET_EXTRA_ATTEMPTS
