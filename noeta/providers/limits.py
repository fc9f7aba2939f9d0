"""How fast a worker calls a provider: a limit shared by all its activities, or by the whole fleet.

``Registry.of(providers={"openai": p}, provider_limits={"openai": ProviderLimit.per_minute(120)})``
keeps calls under a provider's quota, so a burst of tasks queues here instead of collecting 429s.
A call that would have to wait longer than it may inside one attempt hands its place back to
Temporal with a retry delay instead (a *wait* for the attempt ledger: it never uses up the call's
retries, only its ``rate_limit_wait_seconds``), so waiting calls do not hold worker slots for long.

Every provider, limited or not, also honours what its answers say: a 429's ``retry-after`` and a
quota announced as spent (``x-ratelimit-remaining-requests: 0`` and its reset; see
noeta.providers.rate_headers) pause all later calls to it until then, instead of sending them into
more 429s.

``NOETA_PROVIDER_LIMITS=openai=120/60,anthropic=50/60/8`` (``name=REQUESTS/SECONDS[/CONCURRENT]``)
states limits for every worker started with it (``noeta worker`` included); a registry's own limit
for a provider wins.

The counts are this worker's own unless the registry's ``rate_limits`` (else ``NOETA_RATE_LIMITS``)
names a Redis or PostgreSQL server (noeta.providers.rate_windows): then a limit and a pause hold for
every worker of the fleet together, each worker configured with the same limit. ``max_concurrent``
is always per worker.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, field_validator

from noeta.config.settings import EnvSettings
from noeta.errors import ConfigurationError, ProviderError
from noeta.providers.rate_headers import RateSignal, watching
from noeta.providers.rate_windows import LocalWindows, RateWindows

logger = logging.getLogger(__name__)

#: Longest a call queues inside one attempt before it hands its place back to Temporal.
MAX_QUEUE_SECONDS = 30.0
#: After shared counts could not be reached, how long this worker counts alone before trying again.
SHARED_RETRY_SECONDS = 30.0


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


#: Provider limits for every worker started with this environment: ``name=REQUESTS/SECONDS``
#: (``/CONCURRENT`` optional), comma-separated, e.g. ``openai=120/60,anthropic=50/60/8``.
PROVIDER_LIMITS_VARIABLE = "NOETA_PROVIDER_LIMITS"


def parse_provider_limits(text: str) -> dict[str, ProviderLimit]:
    """The limits ``NOETA_PROVIDER_LIMITS`` states, by provider name; ConfigurationError naming the
    variable and the entry for anything else."""
    limits: dict[str, ProviderLimit] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, _, rule = entry.partition("=")
        parts = rule.split("/")
        try:
            if not name.strip() or len(parts) not in (2, 3) or name.strip() in limits:
                raise ValueError(entry)
            concurrent = int(parts[2]) if len(parts) == 3 else None
            limits[name.strip()] = ProviderLimit(requests=int(parts[0]), per_seconds=float(parts[1]), max_concurrent=concurrent)
        except (ValueError, ConfigurationError) as err:
            raise ConfigurationError(
                f"{PROVIDER_LIMITS_VARIABLE}: {entry!r} is not name=REQUESTS/SECONDS[/CONCURRENT] "
                f"(e.g. openai=120/60){'' if isinstance(err, ValueError) else f': {err}'}"
            ) from None
    return limits


class ProviderLimitSettings(EnvSettings):
    """Provider limits from the environment (``NOETA_PROVIDER_LIMITS``; empty: none). A limit the
    worker's registry sets for a provider wins over this one."""

    limits: dict[str, ProviderLimit] = Field(default_factory=dict, validation_alias=PROVIDER_LIMITS_VARIABLE)
    """The limits by provider name."""

    @field_validator("limits", mode="before")
    @classmethod
    def _parse(cls, raw: Any) -> Any:
        return parse_provider_limits(raw) if isinstance(raw, str) else raw


@dataclass
class Limiter:
    """The live state of one provider's limit in this worker: how many of its calls run, and the
    starts and pauses kept in ``windows`` (this worker's, or shared by the fleet)."""

    provider: str
    limit: ProviderLimit = field(default_factory=ProviderLimit)
    windows: RateWindows = field(default_factory=LocalWindows)
    """Where starts and pauses are counted; when a shared place cannot be reached, this worker
    counts on its own (and logs it) until it can again."""
    _running: int = 0
    _fallback: LocalWindows = field(default_factory=LocalWindows)
    _warned_at: float = -math.inf
    _shared_again_at: float = -math.inf

    def _busy(self, what: str, delay: float) -> ProviderError:
        return ProviderError(
            provider=self.provider,
            message=f"the limit for the provider is reached ({what}); retrying in {delay:.1f} s",
            status=429,
            retryable=True,
            retry_after=delay,
        )

    def _windows(self) -> RateWindows:
        """The shared counts, or the local ones for a while after the shared ones failed."""
        return self._fallback if time.monotonic() < self._shared_again_at else self.windows

    def _unreachable(self, exc: Exception) -> LocalWindows:
        """The local counts, used for SHARED_RETRY_SECONDS once the shared ones cannot be reached
        (logged once a minute)."""
        now = time.monotonic()
        self._shared_again_at = now + SHARED_RETRY_SECONDS
        if now - self._warned_at >= 60.0:
            self._warned_at = now
            logger.warning(
                "rate limits for provider %r cannot be counted %s (%s: %s); this worker counts its own calls meanwhile",
                self.provider, self.windows.where, type(exc).__name__, exc,
            )
        return self._fallback

    async def _reserve(self, requests: int | None, max_wait: float) -> float:
        """Seconds until this call may start (its start reserved); a 429-like ProviderError when
        that is beyond ``max_wait``."""
        windows = self._windows()
        try:
            reservation = await windows.reserve(self.provider, requests, self.limit.per_seconds, max_wait)
        except Exception as exc:  # noqa: BLE001 (a shared store that is down must not stop calls)
            if windows is self._fallback:
                raise
            windows = self._unreachable(exc)  # the refusal below names where the call was counted
            reservation = await windows.reserve(self.provider, requests, self.limit.per_seconds, max_wait)
        if not reservation.granted:
            what = "a pause the provider asked for" if requests is None else (
                f"{requests} calls per {self.limit.per_seconds:g} s {windows.where}"
            )
            raise self._busy(what, reservation.wait)
        return reservation.wait

    async def _pause(self, seconds: float) -> None:
        """Hold back every later call to the provider for ``seconds``."""
        windows = self._windows()
        try:
            await windows.pause(self.provider, seconds)
        except Exception as exc:  # noqa: BLE001 (as in _reserve)
            if windows is self._fallback:
                raise
            await self._unreachable(exc).pause(self.provider, seconds)

    @asynccontextmanager
    async def slot(self, max_wait: float = MAX_QUEUE_SECONDS) -> AsyncIterator[RateSignal]:
        """Hold a place for one call; waits up to ``max_wait``, else raises a 429-like
        ProviderError whose ``retry_after`` says when to come back. What the call's answers say
        about the provider's quota (its :class:`RateSignal`, and a 429's ``retry-after``) pauses
        later calls."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait
        waited = await self._reserve(self.limit.requests, max_wait)
        if waited > 0:
            await asyncio.sleep(waited)
        while self.limit.max_concurrent is not None and self._running >= self.limit.max_concurrent:
            if loop.time() >= deadline:
                raise self._busy(f"{self.limit.max_concurrent} calls at once", 1.0)
            waited = max(waited, 0.05)
            await asyncio.sleep(0.05)
        self._running += 1  # held from here, also while waiting out a pause
        try:
            if waited > 0:  # a pause learnt while this call waited its turn
                pause = await self._reserve(None, max(0.0, deadline - loop.time()))
                if pause > 0:
                    await asyncio.sleep(pause)
        except BaseException:
            self._running -= 1
            raise
        signal = RateSignal()
        try:
            with watching(signal):
                yield signal
        except ProviderError as exc:
            if exc.status == 429 and exc.retry_after:
                signal.ask(exc.retry_after)
            raise
        finally:
            try:
                if signal.pause_seconds > 0:
                    await self._pause(signal.pause_seconds)
            finally:
                self._running -= 1
