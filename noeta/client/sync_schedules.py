"""The synchronous client's schedule calls: a part of :class:`~noeta.client.sync.Client`, which
forwards them here, each call run on the client's event loop by its AsyncClient
(:mod:`noeta.client.schedule_methods` documents them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from noeta.client.sync_session import SyncSession
from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.client.schedule_info import ScheduleInfo
from noeta.client.visibility import TaskSummary

class SyncScheduleCalls:
    """``create_schedule``, ``list_schedules``, ``describe_schedule``, ``pause_schedule``,
    ``unpause_schedule``, ``trigger_schedule``, ``backfill_schedule``, ``delete_schedule`` and
    ``schedule_runs``, blocking; the keywords are AsyncClient's. ``self`` is positional-only: with
    ``**kwargs`` beside it, that is what lets :class:`~noeta.client.forwarding.Forwarded` type them."""

    def __init__(self, session: SyncSession) -> None:
        """The calls are ``session``'s AsyncClient's, each run to its end on its loop."""
        self._session = session
        self._run = session.run

    @property
    def aio(self) -> AsyncClient:
        """The AsyncClient the calls run on (RuntimeError once the client is closed)."""
        return self._session.aio

    def create_schedule(self, /, schedule_id: str, goal: str, options: Options | None = None, **kwargs: Any) -> str:
        """Start ``goal`` as a task on a clock (``cron=`` or ``every=``, see AsyncClient.create_schedule)."""
        return self._run(self.aio.create_schedule(schedule_id, goal, options, **kwargs))

    def list_schedules(self, /, limit: int = 100, **kwargs: Any) -> list[ScheduleInfo]:
        """The schedules of tasks, by id."""
        return self._run(self.aio.list_schedules(limit, **kwargs))

    def describe_schedule(self, /, schedule_id: str, **kwargs: Any) -> ScheduleInfo:
        """The schedule as it is now: next run times, recent runs and their task ids."""
        return self._run(self.aio.describe_schedule(schedule_id, **kwargs))

    def pause_schedule(self, /, schedule_id: str, note: str | None = None, **kwargs: Any) -> None:
        """Start no run until unpaused."""
        self._run(self.aio.pause_schedule(schedule_id, note, **kwargs))

    def unpause_schedule(self, /, schedule_id: str, note: str | None = None, **kwargs: Any) -> None:
        """Let a paused schedule run again."""
        self._run(self.aio.unpause_schedule(schedule_id, note, **kwargs))

    def trigger_schedule(self, /, schedule_id: str, **kwargs: Any) -> None:
        """Start a run now."""
        self._run(self.aio.trigger_schedule(schedule_id, **kwargs))

    def backfill_schedule(self, /, schedule_id: str, start: datetime, end: datetime, **kwargs: Any) -> None:
        """Start the runs that were due between ``start`` and ``end``."""
        self._run(self.aio.backfill_schedule(schedule_id, start, end, **kwargs))

    def delete_schedule(self, /, schedule_id: str, **kwargs: Any) -> None:
        """Delete the schedule (its tasks stay)."""
        self._run(self.aio.delete_schedule(schedule_id, **kwargs))

    def schedule_runs(self, /, schedule_id: str, limit: int = 50, **kwargs: Any) -> list[TaskSummary]:
        """The tasks the schedule started, newest first."""
        return self._run(self.aio.schedule_runs(schedule_id, limit, **kwargs))


__all__ = ["SyncScheduleCalls"]
