"""Where the starts of provider calls are counted: in this process, or in Redis or PostgreSQL for
every worker of a fleet at once.

A :class:`~noeta.providers.limits.ProviderLimit` of N requests per window lets a call start at the
earliest moment that keeps at most N starts in any window (a reservation: a caller that has to wait
holds its place, and later callers queue behind it), and never before a pause the provider asked for
(a 429's ``retry-after``, a quota announced as spent: noeta.providers.rate_headers). Three places
keep those counts, with the same rule:

- :class:`LocalWindows`: this process (the default);
- :class:`RedisWindows`: a sorted set per provider, updated by one script (Redis's own clock);
- :class:`PostgresWindows`: table ``noeta_rate_starts`` under a per-provider advisory lock
  (PostgreSQL's clock).

:func:`windows_from_url` picks one from a ``redis://`` or ``postgresql://`` URL. Starts are kept as
seconds on the counting side's clock, so workers on hosts whose clocks differ still agree.
"""

from __future__ import annotations

import asyncio
import bisect
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import Field, field_validator

from noeta.config.postgres import psycopg_driver
from noeta.config.settings import EnvSettings
from noeta.errors import ConfigurationError


@dataclass(frozen=True)
class Reservation:
    """The answer to one request for a start: ``granted`` (then the caller waits ``wait`` seconds
    and starts), or not, because the earliest start is ``wait`` seconds away, beyond what the caller
    may wait."""

    granted: bool
    wait: float


class RateWindows(Protocol):
    """Counts call starts per provider name, wherever they are kept."""

    where: str
    """A short description for messages and logs (``in this worker``, ``in Redis``...)."""

    async def reserve(self, provider: str, requests: int | None, per_seconds: float, max_wait: float) -> Reservation:
        """A start for one call to ``provider`` under ``requests`` per ``per_seconds`` (None: no
        count, only pauses), granted only if it is at most ``max_wait`` seconds away."""
        ...

    async def pause(self, provider: str, seconds: float) -> None:
        """Start no call to ``provider`` for ``seconds`` from now (a longer pause already set stays)."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def _start(starts: list[float], now: float, requests: int | None, per_seconds: float, paused: float) -> float:
    """The earliest start at or after ``now`` leaving at most ``requests`` in any ``per_seconds``
    of the sorted ``starts`` (which lose those that no longer count), and not before ``paused``."""
    start = now
    if requests is not None:
        del starts[: bisect.bisect_right(starts, now - per_seconds)]
        if len(starts) >= requests:
            start = max(start, starts[-requests] + per_seconds)
    return max(start, paused)


@dataclass
class LocalWindows:
    """Counts kept in this process: every limiter of one worker shares them."""

    where: str = "in this worker"
    _starts: dict[str, list[float]] = field(default_factory=dict)
    _paused: dict[str, float] = field(default_factory=dict)

    async def reserve(self, provider: str, requests: int | None, per_seconds: float, max_wait: float) -> Reservation:
        """See :meth:`RateWindows.reserve`."""
        now = time.monotonic()
        starts = self._starts.setdefault(provider, [])
        start = _start(starts, now, requests, per_seconds, self._paused.get(provider, 0.0))
        if start - now > max_wait:
            return Reservation(False, start - now)
        if requests is not None:
            bisect.insort(starts, start)
        return Reservation(True, start - now)

    async def pause(self, provider: str, seconds: float) -> None:
        """See :meth:`RateWindows.pause`."""
        self._paused[provider] = max(self._paused.get(provider, 0.0), time.monotonic() + seconds)

    async def aclose(self) -> None:
        """Nothing to release."""


#: KEYS: the starts' sorted set, the pause key. ARGV: requests (0: none), window, max wait, member.
_RESERVE_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local requests, window, max_wait = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local start = now
if requests > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
  local n = redis.call('ZCARD', KEYS[1])
  if n >= requests then
    local nth = redis.call('ZRANGE', KEYS[1], n - requests, n - requests, 'WITHSCORES')
    start = math.max(start, tonumber(nth[2]) + window)
  end
end
local paused = tonumber(redis.call('GET', KEYS[2]) or '0')
if paused > start then start = paused end
local wait = start - now
if wait > max_wait then return {0, tostring(wait)} end
if requests > 0 then
  redis.call('ZADD', KEYS[1], start, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], math.ceil((wait + window) * 1000) + 1000)
end
return {1, tostring(wait)}
"""
#: KEYS: the pause key. ARGV: seconds.
_PAUSE_SCRIPT = """
local t = redis.call('TIME')
local seconds = tonumber(ARGV[1])
local until_ = tonumber(t[1]) + tonumber(t[2]) / 1000000 + seconds
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if until_ > current then
  redis.call('SET', KEYS[1], tostring(until_), 'PX', math.ceil(seconds * 1000) + 1000)
end
return 1
"""


class RedisWindows:
    """Counts kept in Redis (keys ``{prefix}{provider}:starts`` and ``:paused``), shared by every
    worker pointed at the same server. Needs the ``noeta[redis]`` extra."""

    where = "in Redis"

    def __init__(self, url: str, prefix: str = "noeta:rate:") -> None:
        """``url``: the Redis server (``redis://host:port/db``); ``prefix``: of the keys (give
        fleets that share a server but not a provider account their own)."""
        try:
            import redis.asyncio as redis
        except ImportError as err:
            raise ConfigurationError("shared rate limits in Redis need: pip install 'noeta[redis]'") from err
        self.url, self.prefix = url, prefix
        self._redis: Any = redis
        self._clients: dict[int, Any] = {}  # one client per event loop

    def _client(self) -> Any:
        loop = id(asyncio.get_running_loop())
        if loop not in self._clients:
            self._clients[loop] = self._redis.Redis.from_url(self.url, socket_timeout=5, socket_connect_timeout=5)
        return self._clients[loop]

    async def reserve(self, provider: str, requests: int | None, per_seconds: float, max_wait: float) -> Reservation:
        """See :meth:`RateWindows.reserve`."""
        keys = [f"{self.prefix}{provider}:starts", f"{self.prefix}{provider}:paused"]
        args = [requests or 0, repr(float(per_seconds)), repr(float(max_wait)), uuid.uuid4().hex]
        granted, wait = await self._client().eval(_RESERVE_SCRIPT, 2, *keys, *args)
        return Reservation(bool(int(granted)), max(0.0, float(wait)))

    async def pause(self, provider: str, seconds: float) -> None:
        """See :meth:`RateWindows.pause`."""
        await self._client().eval(_PAUSE_SCRIPT, 1, f"{self.prefix}{provider}:paused", repr(float(seconds)))

    async def aclose(self) -> None:
        """Close this process's connections."""
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.aclose()


_PG_SCHEMA = """
CREATE TABLE IF NOT EXISTS noeta_rate_starts (provider text NOT NULL, at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS noeta_rate_starts_provider_at ON noeta_rate_starts (provider, at);
CREATE TABLE IF NOT EXISTS noeta_rate_paused (provider text PRIMARY KEY, until double precision NOT NULL);
"""
_PG_NOW = "SELECT pg_advisory_xact_lock(hashtextextended('noeta_rate:' || %s, 0)), extract(epoch FROM clock_timestamp())::float8"


class PostgresWindows:
    """Counts kept in PostgreSQL (tables ``noeta_rate_starts`` and ``noeta_rate_paused``), shared by
    every worker pointed at the same database; one transaction per reservation, serialised per
    provider by an advisory lock. Needs the ``noeta[postgres]`` extra."""

    where = "in PostgreSQL"

    def __init__(self, dsn: str) -> None:
        """``dsn``: the PostgreSQL connection string."""
        self.dsn = dsn
        self._psycopg: Any = psycopg_driver("a shared rate limit in PostgreSQL")
        self._connections: dict[int, tuple[Any, asyncio.Lock]] = {}  # one per event loop
        self._schema_ready = False

    async def _connection(self) -> tuple[Any, asyncio.Lock]:
        loop = id(asyncio.get_running_loop())
        entry = self._connections.get(loop)
        if entry is None or entry[0].closed:
            conn = await self._psycopg.AsyncConnection.connect(self.dsn, autocommit=True, connect_timeout=5)
            if not self._schema_ready:
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('noeta_rate:schema', 0))")
                    await conn.execute(_PG_SCHEMA)
                self._schema_ready = True
            entry = self._connections[loop] = (conn, asyncio.Lock())
        return entry

    async def reserve(self, provider: str, requests: int | None, per_seconds: float, max_wait: float) -> Reservation:
        """See :meth:`RateWindows.reserve`."""
        conn, lock = await self._connection()
        async with lock, conn.transaction():
            now = (await (await conn.execute(_PG_NOW, (provider,))).fetchone())[1]
            start = now
            if requests is not None:
                await conn.execute(
                    "DELETE FROM noeta_rate_starts WHERE provider = %s AND at <= %s", (provider, now - per_seconds)
                )
                row = await (await conn.execute(
                    "SELECT at FROM noeta_rate_starts WHERE provider = %s ORDER BY at DESC OFFSET %s LIMIT 1",
                    (provider, requests - 1),
                )).fetchone()
                if row is not None:
                    start = max(start, row[0] + per_seconds)
            paused = await (await conn.execute(
                "SELECT until FROM noeta_rate_paused WHERE provider = %s", (provider,)
            )).fetchone()
            if paused is not None:
                start = max(start, paused[0])
            if start - now > max_wait:
                return Reservation(False, start - now)
            if requests is not None:
                await conn.execute("INSERT INTO noeta_rate_starts (provider, at) VALUES (%s, %s)", (provider, start))
            return Reservation(True, start - now)

    async def pause(self, provider: str, seconds: float) -> None:
        """See :meth:`RateWindows.pause`."""
        conn, lock = await self._connection()
        async with lock, conn.transaction():
            await conn.execute(
                "INSERT INTO noeta_rate_paused (provider, until) VALUES (%s, extract(epoch FROM clock_timestamp()) + %s) "
                "ON CONFLICT (provider) DO UPDATE SET until = greatest(noeta_rate_paused.until, excluded.until)",
                (provider, seconds),
            )

    async def aclose(self) -> None:
        """Close this process's connections."""
        connections, self._connections = self._connections, {}
        for conn, _ in connections.values():
            await conn.close()


#: Where every worker of a fleet counts its provider calls (unset: each worker on its own).
RATE_LIMITS_VARIABLE = "NOETA_RATE_LIMITS"


def _check_url(url: str) -> str:
    if not url.startswith(("redis://", "rediss://", "unix://", "postgresql://", "postgres://")):
        raise ConfigurationError(
            f"{RATE_LIMITS_VARIABLE} must be a redis:// or postgresql:// URL, got {url.split(':')[0]}:…"
        )
    return url


class RateLimitSettings(EnvSettings):
    """Where provider limits are counted, from ``NOETA_RATE_LIMITS`` (empty: unset)."""

    url: str | None = Field(default=None, validation_alias=RATE_LIMITS_VARIABLE)
    """``redis://`` or ``postgresql://`` URL shared by the fleet's workers (None: each worker counts
    its own calls)."""

    @field_validator("url", mode="after")
    @classmethod
    def _shared(cls, url: str | None) -> str | None:
        return _check_url(url) if url else None


def rate_windows(configured: RateWindows | str | None = None) -> RateWindows:
    """The counts a worker uses: ``configured`` (a :class:`RateWindows` or a URL), else
    ``NOETA_RATE_LIMITS``, else this worker's own (:class:`LocalWindows`)."""
    if configured is not None and not isinstance(configured, str):
        return configured
    url = configured or RateLimitSettings().url
    return windows_from_url(url) if url else LocalWindows()


def windows_from_url(url: str) -> RateWindows:
    """The shared counts at ``url``: ``redis://`` / ``rediss://`` or ``postgresql://`` /
    ``postgres://``; ConfigurationError for anything else."""
    if _check_url(url).startswith(("postgresql://", "postgres://")):
        return PostgresWindows(url)
    return RedisWindows(url)


__all__ = [
    "RATE_LIMITS_VARIABLE",
    "LocalWindows",
    "PostgresWindows",
    "RateLimitSettings",
    "RateWindows",
    "RedisWindows",
    "Reservation",
    "rate_windows",
    "windows_from_url",
]
