"""Where provider limits are counted: one worker's counts, or Redis's and PostgreSQL's shared by a
fleet, and the pauses a provider's answers ask for (noeta.providers.rate_windows, rate_headers).

Two limiters with their own connections stand for two worker processes: what one takes or learns,
the other sees. Against the real Redis (127.0.0.1:6379) and PostgreSQL (127.0.0.1:5432).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timezone

import pytest

from noeta.errors import ConfigurationError, ProviderError
from noeta.providers.limits import Limiter, ProviderLimit, ProviderLimitSettings
from noeta.providers.rate_headers import observe, pause_of, reset_seconds
from noeta.providers.rate_windows import (
    LocalWindows,
    PostgresWindows,
    RateWindows,
    RedisWindows,
    rate_windows,
)
from tests.support.postgres import DSN as PG_DSN
from tests.support.postgres import require_postgres
from tests.support.resources import REDIS_URL, require_redis, unique


def test_reset_headers_in_each_providers_form():
    assert reset_seconds("6m0s") == 360.0
    assert reset_seconds("1.5s") == 1.5
    assert reset_seconds("20ms") == pytest.approx(0.02)
    assert reset_seconds("1h2m3s") == 3723.0
    assert reset_seconds("7") == 7.0
    assert reset_seconds("2026-12-02T10:00:30Z", now=datetime(2026, 12, 2, 10, 0, tzinfo=timezone.utc).timestamp()) == 30.0
    assert reset_seconds("soon") is None


def test_only_a_spent_quota_asks_for_a_pause():
    openai = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "12s",
              "x-ratelimit-remaining-tokens": "40000", "x-ratelimit-reset-tokens": "1m0s"}
    assert pause_of(openai) == 12.0
    assert pause_of({**openai, "x-ratelimit-remaining-requests": "3"}) == 0.0
    now = datetime(2026, 12, 2, 10, 0, tzinfo=timezone.utc).timestamp()
    anthropic = {"Anthropic-RateLimit-Tokens-Remaining": "0", "Anthropic-RateLimit-Tokens-Reset": "2026-12-02T10:00:05Z",
                 "anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": "2026-12-02T10:00:02Z"}
    assert pause_of(anthropic, now=now) == 5.0
    assert pause_of({"ratelimit-remaining": "0", "ratelimit-reset": "4"}) == 4.0
    # Unreadable or unbelievable values never stop a provider.
    assert pause_of({"x-ratelimit-remaining-requests": "none", "x-ratelimit-reset-requests": "12s"}) == 0.0
    assert pause_of({"ratelimit-remaining": "0", "ratelimit-reset": "86400"}) == 0.0


@pytest.fixture(params=["local", "redis", "postgres"])
async def two_workers(request) -> AsyncIterator[Callable[[ProviderLimit], tuple[Limiter, Limiter]]]:
    """Two limiters for one provider, each with its own windows object on the same counts (for
    "local", the one object a worker's limiters share)."""
    provider = unique("provider")
    made: list[RateWindows] = []

    def windows() -> RateWindows:
        if request.param == "local":
            return made[0] if made else LocalWindows()
        if request.param == "redis":
            return RedisWindows(REDIS_URL, prefix=f"{provider}:")
        return PostgresWindows(PG_DSN)

    if request.param == "redis":
        require_redis()
    if request.param == "postgres":
        require_postgres()

    def pair(limit: ProviderLimit) -> tuple[Limiter, Limiter]:
        first = windows()
        made.append(first)
        second = windows()
        made.append(second)
        return Limiter(provider, limit, first), Limiter(provider, limit, second)

    yield pair
    for w in made:
        await w.aclose()
    if request.param == "postgres":
        forget_in_postgres(provider)


def forget_in_postgres(provider: str) -> None:
    """Remove a test provider's rows (its name is unique: nothing else counts under it)."""
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute("DELETE FROM noeta_rate_starts WHERE provider = %s", (provider,))
        conn.execute("DELETE FROM noeta_rate_paused WHERE provider = %s", (provider,))


async def take(limiter: Limiter, max_wait: float = 0.0) -> None:
    async with limiter.slot(max_wait):
        pass


async def test_a_limit_holds_for_both_workers_together(two_workers):
    a, b = two_workers(ProviderLimit(requests=3, per_seconds=30.0))
    await take(a)
    await take(b)
    await take(a)
    for limiter in (b, a):
        with pytest.raises(ProviderError) as refused:
            await take(limiter)
        assert (refused.value.status, refused.value.retryable) == (429, True)
        assert 25.0 < refused.value.retry_after <= 30.0
        assert "3 calls per 30 s" in str(refused.value)


async def test_a_call_over_the_limit_queues_for_its_turn(two_workers):
    a, b = two_workers(ProviderLimit(requests=2, per_seconds=0.5))
    await take(a)
    await take(b)
    began = time.monotonic()
    await take(a, max_wait=5.0)  # the third start of the window waits for the first to age out
    assert time.monotonic() - began >= 0.4


async def test_a_429_pauses_every_worker_for_its_retry_after(two_workers):
    a, b = two_workers(ProviderLimit())  # no limit of its own: only what the provider says
    with pytest.raises(ProviderError):
        async with a.slot(0.0):
            raise ProviderError(provider="p", message="slow down", status=429, retryable=True, retry_after=20.0)
    with pytest.raises(ProviderError) as refused:
        await take(b)
    assert 18.0 < refused.value.retry_after <= 20.0
    assert "a pause the provider asked for" in str(refused.value)


async def test_a_spent_quota_announced_in_headers_pauses_every_worker(two_workers):
    a, b = two_workers(ProviderLimit(requests=100, per_seconds=60.0))
    async with a.slot(0.0):
        observe({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "15s"})
    with pytest.raises(ProviderError) as refused:
        await take(b)
    assert 13.0 < refused.value.retry_after <= 15.0
    # A quota with something left asks for nothing.
    provider_c = Limiter("other", ProviderLimit(), LocalWindows())
    async with provider_c.slot(0.0):
        observe({"x-ratelimit-remaining-requests": "1", "x-ratelimit-reset-requests": "15s"})
    await take(provider_c)


async def test_unreachable_shared_counts_fall_back_to_the_workers_own(caplog):
    limiter = Limiter("p", ProviderLimit(requests=1, per_seconds=30.0), RedisWindows("redis://127.0.0.1:1/0"))
    with caplog.at_level(logging.WARNING, logger="noeta.providers.limits"):
        await take(limiter)  # Redis is not there: this worker counts alone, and says so
    assert "cannot be counted in Redis" in caplog.text
    with pytest.raises(ProviderError) as refused:
        await take(limiter)
    assert "in this worker" in str(refused.value)
    await limiter.windows.aclose()


async def test_the_counts_are_chosen_by_url(monkeypatch):
    monkeypatch.delenv("NOETA_RATE_LIMITS", raising=False)
    assert isinstance(rate_windows(), LocalWindows)
    monkeypatch.setenv("NOETA_RATE_LIMITS", "postgresql://u@h/db")
    assert isinstance(rate_windows(), PostgresWindows)
    assert isinstance(rate_windows("redis://127.0.0.1:6379/0"), RedisWindows)
    monkeypatch.setenv("NOETA_RATE_LIMITS", "memcached://h")
    with pytest.raises(ConfigurationError, match="NOETA_RATE_LIMITS must be a redis:// or postgresql:// URL"):
        rate_windows()


async def test_concurrent_reservations_in_postgres_never_exceed_the_limit():
    require_postgres()
    provider = unique("provider")
    workers = [PostgresWindows(PG_DSN) for _ in range(4)]
    try:
        results = await asyncio.gather(*(
            w.reserve(provider, 5, 30.0, 0.0) for w in workers for _ in range(3)
        ))
    finally:
        for w in workers:
            await w.aclose()
        forget_in_postgres(provider)
    assert sum(r.granted for r in results) == 5


def test_provider_limits_from_the_environment():
    limits = ProviderLimitSettings.from_env({"NOETA_PROVIDER_LIMITS": "openai=120/60, anthropic=50/60/8"}).limits
    assert limits == {"openai": ProviderLimit(120, 60.0), "anthropic": ProviderLimit(50, 60.0, max_concurrent=8)}
    assert ProviderLimitSettings.from_env({"NOETA_PROVIDER_LIMITS": ""}).limits == {}
    for bad in ("openai", "openai=120", "openai=0/60", "openai=1/0", "=1/60", "openai=1/60/x"):
        with pytest.raises(ConfigurationError, match=f"NOETA_PROVIDER_LIMITS: '{bad}' is not name=REQUESTS/SECONDS"):
            ProviderLimitSettings.from_env({"NOETA_PROVIDER_LIMITS": bad})
