"""Remembering why earlier attempts of an activity failed.

Temporal records only an activity's last failure in history. Each attempt therefore reads the
failures of the attempts before it from the heartbeat details (which survive retries), and an
attempt that fails heartbeats the extended list before raising. The list ends up in the final
result (``retried``) or in the final failure's details, so every attempt is accounted for.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from temporalio import activity

from noeta.errors import NoetaError, ProviderError
from noeta.protocols.task import AttemptFailure

LOST_ATTEMPT = "the attempt ended without a result (it timed out or its worker was lost)"


def earlier_failures() -> list[AttemptFailure]:
    info = activity.info()
    recorded: list[AttemptFailure] = []
    if info.heartbeat_details and isinstance(info.heartbeat_details[0], list):
        recorded = [AttemptFailure(**item) for item in info.heartbeat_details[0]]
    seen = {f.attempt for f in recorded}
    lost = [AttemptFailure(n, LOST_ATTEMPT, "Timeout") for n in range(1, info.attempt) if n not in seen]
    return sorted(recorded + lost, key=lambda f: f.attempt)


def record_failure(earlier: list[AttemptFailure], err: NoetaError) -> list[AttemptFailure]:
    """Add this attempt's failure and heartbeat the list so the next attempt sees it."""
    retry_after = err.retry_after if isinstance(err, ProviderError) else None
    failures = [*earlier, AttemptFailure(activity.info().attempt, str(err), type(err).__name__, retry_after)]
    activity.heartbeat(as_details(failures))
    return failures


def as_details(failures: list[AttemptFailure]) -> list[dict[str, Any]]:
    return [asdict(f) for f in failures]
