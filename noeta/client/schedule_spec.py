"""When a schedule runs and what it does when runs collide: the arguments of
``Client.create_schedule`` checked, and turned into Temporal's ``ScheduleSpec`` and ``SchedulePolicy``.

Everything here is checked before a schedule is created, so a mistake raises a
:class:`~noeta.errors.ConfigurationError` saying what to write instead, and nothing exists on the
cluster afterwards. The server checks a cron expression's values once more (a minute of 61); that
refusal is turned into the same error (:mod:`noeta.client.schedules`).
"""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta
from typing import Any, Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from temporalio.client import ScheduleIntervalSpec, ScheduleOverlapPolicy, SchedulePolicy, ScheduleSpec

from noeta.errors import ConfigurationError

Overlap = Literal["skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"]
"""What a schedule does when a run is due while the last one still runs: ``skip`` it (the
default), start it once the last ends (``buffer_one``: at most one waiting; ``buffer_all``: every
one), cancel or terminate the last one and start it (``cancel_other``, ``terminate_other``), or
start it anyway (``allow_all``)."""
OVERLAPS: tuple[str, ...] = get_args(Overlap)
DEFAULT_OVERLAP: Overlap = "skip"
#: Temporal's own names of the overlap policies.
OVERLAP_POLICIES: dict[str, ScheduleOverlapPolicy] = {
    name: ScheduleOverlapPolicy[name.upper()] for name in OVERLAPS
}
#: The shortest interval between runs, and the shortest catch-up window Temporal keeps.
MIN_EVERY = timedelta(seconds=1)
MIN_CATCHUP_WINDOW = timedelta(seconds=10)

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
#: A cron expression: 5 to 7 fields (seconds and year optional), or a macro such as ``@daily``.
_CRON_MACRO = re.compile(r"^@(yearly|annually|monthly|weekly|daily|midnight|hourly|every\s+\S+)$")


def duration(value: object, what: str) -> timedelta:
    """``value`` (a timedelta, seconds as a number, or text such as ``"90"``, ``"10s"``, ``"5m"``,
    ``"2h"``, ``"1d"``) as a timedelta; ConfigurationError for anything else or a negative one."""
    if isinstance(value, timedelta):
        found = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        found = timedelta(seconds=value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        found = timedelta(seconds=float(match[1]) * _UNITS[match[2] or "s"])
    else:
        raise ConfigurationError(f"{what} must be a duration such as 10s, 5m, 2h or 1d (or seconds), got {value!r}")
    if found < timedelta(0):
        raise ConfigurationError(f"{what} must not be negative, got {value!r}")
    return found


def check_timezone(name: str) -> str:
    """``name`` if it is an IANA time zone this machine knows (``Europe/Berlin``, ``UTC``)."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigurationError(
            f"unknown timezone {name!r}: use an IANA name such as 'Europe/Berlin', 'America/New_York' or 'UTC'"
        ) from None
    return name


def check_cron(expression: str) -> str:
    """``expression`` if it looks like a cron expression (the server checks each field's range)."""
    if not isinstance(expression, str) or not (
        _CRON_MACRO.match(expression.strip()) or 5 <= len(expression.split()) <= 7
    ):
        raise ConfigurationError(
            f"cron {expression!r} is not a cron expression: give 5 fields (minute hour day-of-month month "
            "day-of-week, e.g. '0 8 * * MON-FRI' for weekdays at 08:00) or a macro such as '@daily'"
        )
    return expression.strip()


@dataclasses.dataclass(frozen=True)
class Timing:
    """When a schedule runs (``cron`` or ``every``, with its ``timezone`` and ``jitter``) and what
    it does when runs collide or were missed (``overlap``, ``catchup_window``), as asked for."""

    cron: str | None = None
    every: timedelta | None = None
    timezone: str | None = None
    overlap: Overlap = DEFAULT_OVERLAP
    catchup_window: timedelta | None = None
    jitter: timedelta | None = None

    @classmethod
    def checked(
        cls, *, cron: str | None, every: object, timezone: str | None, overlap: str, catchup_window: object,
        jitter: object,
    ) -> Timing:
        """The timing, every argument checked (ConfigurationError saying what to write instead)."""
        if (cron is None) == (every is None):
            raise ConfigurationError(
                "give exactly one of cron (e.g. cron='0 8 * * MON-FRI') and every (e.g. every='10m'), "
                f"got {'both' if cron is not None else 'neither'}"
            )
        if overlap not in OVERLAPS:
            raise ConfigurationError(f"unknown overlap {overlap!r}: one of {', '.join(OVERLAPS)}")
        interval = duration(every, "every") if every is not None else None
        if interval is not None and interval < MIN_EVERY:
            raise ConfigurationError(f"every must be at least {MIN_EVERY.total_seconds():g} s, got {every!r}")
        window = duration(catchup_window, "catchup_window") if catchup_window is not None else None
        if window is not None and window < MIN_CATCHUP_WINDOW:
            raise ConfigurationError(
                f"catchup_window must be at least {MIN_CATCHUP_WINDOW.total_seconds():g} s, got {catchup_window!r}"
            )
        if timezone is not None and every is not None:
            raise ConfigurationError("timezone applies to cron schedules only; an interval (every) runs the same in every zone")
        return cls(
            cron=check_cron(cron) if cron is not None else None,
            every=interval,
            timezone=check_timezone(timezone) if timezone is not None else None,
            overlap=overlap,  # type: ignore[arg-type]  # checked against OVERLAPS above
            catchup_window=window,
            jitter=duration(jitter, "jitter") if jitter is not None else None,
        )

    def spec(self) -> ScheduleSpec:
        """Temporal's spec of when the schedule runs."""
        return ScheduleSpec(
            cron_expressions=[self.cron] if self.cron is not None else [],
            intervals=[ScheduleIntervalSpec(every=self.every)] if self.every is not None else [],
            time_zone_name=self.timezone,
            jitter=self.jitter,
        )

    def policy(self) -> SchedulePolicy:
        """Temporal's policy for overlapping and missed runs (its default catch-up window unless set)."""
        if self.catchup_window is None:
            return SchedulePolicy(overlap=OVERLAP_POLICIES[self.overlap])
        return SchedulePolicy(overlap=OVERLAP_POLICIES[self.overlap], catchup_window=self.catchup_window)

    def describe(self) -> str:
        """``cron 0 8 * * MON-FRI (Europe/Berlin)`` or ``every 10s``: how people read it."""
        if self.cron is not None:
            return f"cron {self.cron}" + (f" ({self.timezone})" if self.timezone else "")
        seconds = self.every.total_seconds() if self.every is not None else 0
        return f"every {seconds:g}s"

    def to_memo(self, goal: str) -> dict[str, Any]:
        """The schedule's memo entry: this timing as asked for, and the goal of its runs."""
        return {"goal": goal, "cron": self.cron, "every_seconds": self.every.total_seconds() if self.every else None,
                "timezone": self.timezone}


def overlap_name(policy: ScheduleOverlapPolicy) -> str:
    """Noeta's name of a Temporal overlap policy (``skip`` for an unspecified one, the server's default)."""
    return next((name for name, p in OVERLAP_POLICIES.items() if p == policy), DEFAULT_OVERLAP)


__all__ = [
    "DEFAULT_OVERLAP", "MIN_CATCHUP_WINDOW", "MIN_EVERY", "OVERLAPS", "OVERLAP_POLICIES", "Overlap",
    "Timing", "check_cron", "check_timezone", "duration", "overlap_name",
]
