"""What a provider's answer says about its rate limit, and how it reaches the call's limiter.

Providers announce how much of their quota is left on every answer:

- OpenAI (and compatible servers): ``x-ratelimit-remaining-requests`` / ``-tokens`` with
  ``x-ratelimit-reset-requests`` / ``-tokens`` as a duration (``1s``, ``6m0s``, ``20ms``);
- Anthropic: ``anthropic-ratelimit-requests-remaining`` / ``-tokens-remaining`` (also
  ``-input-tokens-`` and ``-output-tokens-``) with ``...-reset`` as an RFC 3339 time;
- the IETF draft: ``ratelimit-remaining`` with ``ratelimit-reset`` in seconds.

A quota with nothing left (remaining ``0``) means "send nothing before the reset": :func:`pause_of`
gives that wait. The HTTP adapters hand every answer's headers to :func:`observe`; the limiter of
the call in progress (:class:`RateSignal`, set for the call with :func:`watching`) keeps the
longest wait and applies it to every later call to the provider, including other workers' when the
limiter is shared (noeta.providers.rate_windows).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timezone

from noeta.config.context_values import set_within

#: (remaining, reset) header pairs, each ``reset`` a duration, an RFC 3339 time or seconds.
_PAIRS: tuple[tuple[str, str], ...] = (
    ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
    ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"),
    ("anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"),
    ("anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset"),
    ("anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-reset"),
    ("ratelimit-remaining", "ratelimit-reset"),
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATIONS = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|h|m|s))+")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
#: A reset further away than this is not believed (a misread header must not stop a provider).
MAX_PAUSE_SECONDS = 3600.0


def reset_seconds(value: str, now: float | None = None) -> float | None:
    """Seconds until a ``reset`` header's moment: a duration (``1m30s``, ``250ms``), a number of
    seconds, or an RFC 3339 time (``now``: epoch seconds, default the clock). None if unreadable."""
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    if _DURATIONS.fullmatch(text):
        return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION.findall(text))
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    clock = now if now is not None else datetime.now(timezone.utc).timestamp()
    return max(0.0, moment.timestamp() - clock)


def pause_of(headers: Mapping[str, str], now: float | None = None) -> float:
    """How long the provider asks that nothing more be sent: the longest reset among its quotas
    with nothing remaining (0.0 when every quota has some left or none is announced)."""
    lower = {k.lower(): v for k, v in headers.items()}
    longest = 0.0
    for remaining_name, reset_name in _PAIRS:
        remaining, reset = lower.get(remaining_name), lower.get(reset_name)
        if remaining is None or reset is None:
            continue
        try:
            if float(remaining) > 0:
                continue
        except ValueError:
            continue
        seconds = reset_seconds(reset, now)
        if seconds is not None and seconds <= MAX_PAUSE_SECONDS:
            longest = max(longest, seconds)
    return longest


@dataclass
class RateSignal:
    """The longest wait the answers of one call asked for (seconds; 0.0: none)."""

    pause_seconds: float = 0.0

    def ask(self, seconds: float) -> None:
        """Record a wait of ``seconds`` (the longest one asked wins)."""
        if 0.0 < seconds <= MAX_PAUSE_SECONDS:
            self.pause_seconds = max(self.pause_seconds, seconds)


_current: ContextVar[RateSignal | None] = ContextVar("noeta_rate_signal", default=None)


def watching(signal: RateSignal) -> AbstractContextManager[None]:
    """Collect into ``signal`` what the answers of calls made inside this block say."""
    return set_within(_current, signal)


def observe(headers: Mapping[str, str]) -> None:
    """Read an answer's rate-limit headers for the call in progress (nothing outside a limiter)."""
    signal = _current.get()
    if signal is not None:
        signal.ask(pause_of(headers))


__all__ = ["MAX_PAUSE_SECONDS", "RateSignal", "observe", "pause_of", "reset_seconds", "watching"]
