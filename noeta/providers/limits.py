"""A worker's own limit on how fast it calls a provider, shared by all its activities.

``Registry.of(providers={"openai": p}, provider_limits={"openai": ProviderLimit.per_minute(120)})``
keeps this worker under a provider's quota, so a burst of tasks queues here instead of collecting
429s. A call that would have to wait longer than it may inside one attempt hands its place back to
Temporal with a retry delay instead (a *wait* for the attempt ledger: it never uses up the call's
retries, only its ``rate_limit_wait_seconds``), so waiting calls do not hold worker slots for long.

Several worker processes each keep their own count: give each its share of the quota.
"""

from __future__ import annotations

import asyncio
import collections
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from noeta.errors import ConfigurationError, ProviderError

#: Longest a call queues inside one attempt before it hands its place back to Temporal.
MAX_QUEUE_SECONDS = 30.0


@dataclass(frozen=True)
class ProviderLimit:
    """At most ``requests`` calls started in any ``per_seconds`` window, and at most
    ``max_concurrent`` at once (None: no such limit)."""

    requests: int | None = None
    per_seconds: float = 60.0
    max_concurrent: int | None = None

    def __post_init__(self) -> None:
        """Refuse a limit that could never let a call through, when it is configured."""
        if self.requests is not None and (isinstance(self.requests, bool) or not isinstance(self.requests, int) or self.requests < 1):
            raise ConfigurationError(f"ProviderLimit.requests must be a whole number >= 1, got {self.requests!r}")
        if not (isinstance(self.per_seconds, (int, float)) and math.isfinite(self.per_seconds) and self.per_seconds > 0):
            raise ConfigurationError(f"ProviderLimit.per_seconds must be a number > 0, got {self.per_seconds!r}")
        if self.max_concurrent is not None and (
            isinstance(self.max_concurrent, bool) or not isinstance(self.max_concurrent, int) or self.max_concurrent < 1
        ):
            raise ConfigurationError(f"ProviderLimit.max_concurrent must be a whole number >= 1, got {self.max_concurrent!r}")

    @classmethod
    def per_minute(cls, requests: int, max_concurrent: int | None = None) -> ProviderLimit:
        """A quota stated as providers usually publish it: ``requests`` per minute."""
        return cls(requests=requests, per_seconds=60.0, max_concurrent=max_concurrent)


@dataclass
class Limiter:
    """The live counts for one :class:`ProviderLimit` (one per provider name, per worker)."""

    provider: str
    limit: ProviderLimit
    _starts: collections.deque[float] = field(default_factory=collections.deque)
    """Start times granted (some in the future: reserved), oldest first, within the window."""
    _running: int = 0

    def _next_start(self, now: float) -> float:
        """The earliest time a new call may start under the window rule."""
        window, requests = self.limit.per_seconds, self.limit.requests
        while self._starts and self._starts[0] <= now - window:
            self._starts.popleft()
        if requests is None or len(self._starts) < requests:
            return now
        return self._starts[-requests] + window

    def _busy(self, what: str, delay: float) -> ProviderError:
        return ProviderError(
            provider=self.provider,
            message=f"this worker's limit for the provider is reached ({what}); retrying in {delay:.1f} s",
            status=429,
            retryable=True,
            retry_after=delay,
        )

    @asynccontextmanager
    async def slot(self, max_wait: float = MAX_QUEUE_SECONDS) -> AsyncIterator[None]:
        """Hold a place for one call; waits up to ``max_wait``, else raises a 429-like
        ProviderError whose ``retry_after`` says when to come back."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        start = self._next_start(now)
        if start - now > max_wait:
            raise self._busy(f"{self.limit.requests} calls per {self.limit.per_seconds:g} s", start - now)
        self._starts.append(start)  # reserved: later callers queue behind it
        if start > now:
            await asyncio.sleep(start - now)
        deadline = loop.time() + max(0.0, max_wait - (start - now))
        while self.limit.max_concurrent is not None and self._running >= self.limit.max_concurrent:
            if loop.time() >= deadline:
                raise self._busy(f"{self.limit.max_concurrent} calls at once", 1.0)
            await asyncio.sleep(0.05)
        self._running += 1
        try:
            yield
        finally:
            self._running -= 1
