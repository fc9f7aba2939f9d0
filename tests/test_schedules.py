"""Schedules against the dev server with a real worker: each run is an ordinary task carrying its
schedule's id (TemporalScheduledById, TaskCreated, the UI's details); pause stops new runs,
trigger starts one at once, delete removes the schedule (its tasks stay). Bad input raises the
typed error before anything exists."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from noeta.builtins.llm_policy import LLMPolicy
from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.client.schedule_spec import Timing, duration
from noeta.errors import ConfigurationError, PayloadTooLargeError, ScheduleAlreadyExistsError, ScheduleNotFoundError
from noeta.protocols import event_log as ev
from noeta.protocols.task import MAX_GOAL_BYTES
from noeta.sdk.testing import FakeLLMProvider
from tests.support.scripts import say
from tests.support.waiting import eventually


def answering() -> FakeLLMProvider:
    """Answers every run at once (runs may overlap, so no script position)."""
    return FakeLLMProvider(responder=lambda request: say("triaged"))


def _local_policy() -> LLMPolicy:
    class Local(LLMPolicy):  # defined in a function: no worker can import it
        pass

    return Local()


def new_id(prefix: str = "sched") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_durations_and_timing_are_checked_without_a_server():
    assert duration("10s", "every") == duration(10, "every") == timedelta(seconds=10)
    assert duration("5m", "x") == timedelta(minutes=5) and duration("1.5h", "x") == timedelta(minutes=90)
    assert duration(timedelta(days=1), "x") == duration("1d", "x")
    for bad in ("soon", "-5s", -1, True, "10 parsecs"):
        with pytest.raises(ConfigurationError):
            duration(bad, "every")
    timing = Timing.checked(cron="0 8 * * MON-FRI", every=None, timezone="Europe/Berlin", overlap="buffer_one",
                            catchup_window="12h", jitter="30s")
    assert timing.describe() == "cron 0 8 * * MON-FRI (Europe/Berlin)"
    assert timing.spec().cron_expressions == ["0 8 * * MON-FRI"] and timing.spec().time_zone_name == "Europe/Berlin"
    assert timing.policy().catchup_window == timedelta(hours=12)
    assert Timing.checked(cron=None, every="10s", timezone=None, overlap="skip", catchup_window=None,
                          jitter=None).describe() == "every 10s"


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({}, ConfigurationError, "exactly one of cron"),
        ({"cron": "0 8 * * *", "every": "1h"}, ConfigurationError, "got both"),
        ({"every": "10s", "overlap": "queue"}, ConfigurationError, "unknown overlap 'queue'"),
        ({"cron": "0 8 * * *", "timezone": "Mars/Olympus"}, ConfigurationError, "unknown timezone 'Mars/Olympus'"),
        ({"cron": "every morning"}, ConfigurationError, "is not a cron expression"),
        ({"cron": "61 8 * * *"}, ConfigurationError, "Minute is not in range"),  # the server's check
        ({"every": "0.5s"}, ConfigurationError, "every must be at least 1 s"),
        ({"every": "10s", "catchup_window": "5s"}, ConfigurationError, "catchup_window must be at least 10 s"),
        ({"every": "10s", "timezone": "UTC"}, ConfigurationError, "timezone applies to cron schedules only"),
        ({"every": "10s", "goal": " "}, ConfigurationError, "goal must be a non-empty string"),
        ({"every": "10s", "goal": "x" * (MAX_GOAL_BYTES + 1)}, PayloadTooLargeError, "the limit is"),
        ({"every": "10s", "task_queue": "no spaces"}, ConfigurationError, "task_queue 'no spaces' is not allowed"),
        ({"every": "10s", "options": Options(policy=_local_policy())}, ConfigurationError, "not importable by a worker"),
        ({"every": "10s", "options": Options(observers=[print])}, ConfigurationError, "observers cannot follow"),
        ({"every": "10s", "schedule_id": "a/b"}, ConfigurationError, "'/' at position 1"),
    ],
)
async def test_bad_input_raises_the_typed_error_and_creates_nothing(client: AsyncClient, kwargs, error, says):
    schedule_id = kwargs.pop("schedule_id", new_id("bad"))
    goal = kwargs.pop("goal", "triage the inbox")
    options = kwargs.pop("options", None)
    with pytest.raises(error, match=says) as raised:
        await client.create_schedule(schedule_id, goal, options, **kwargs)
    assert type(raised.value) is error
    if "/" not in schedule_id:
        with pytest.raises(ScheduleNotFoundError):
            await client.describe_schedule(schedule_id)


async def test_an_existing_id_is_refused_and_the_schedule_is_left_as_it_was(client: AsyncClient, task_queue: str):
    schedule_id = new_id("taken")
    await client.create_schedule(schedule_id, "first goal", cron="0 8 * * MON-FRI", timezone="Europe/Berlin",
                                 task_queue=task_queue, paused=True, note="not yet")
    try:
        with pytest.raises(ScheduleAlreadyExistsError, match="choose another id") as raised:
            await client.create_schedule(schedule_id, "second goal", every="10s", task_queue=task_queue)
        assert raised.value.schedule_id == schedule_id
        info = await client.describe_schedule(schedule_id)
        assert (info.goal, info.cron, info.timezone, info.paused, info.note) == (
            "first goal", "0 8 * * MON-FRI", "Europe/Berlin", True, "not yet")
        assert (info.overlap, info.task_queue, info.runs_total, info.next_runs) == ("skip", task_queue, 0, [])
        await client.unpause_schedule(schedule_id)
        info = await client.describe_schedule(schedule_id)
        assert not info.paused and len(info.next_runs) == 5
        assert all(t.astimezone(timezone.utc).minute == 0 for t in info.next_runs)
        assert {t.astimezone(timezone.utc).weekday() for t in info.next_runs} <= {0, 1, 2, 3, 4}
    finally:
        await client.delete_schedule(schedule_id)
    for call in (client.describe_schedule(schedule_id), client.pause_schedule(schedule_id),
                 client.trigger_schedule(schedule_id), client.delete_schedule(schedule_id)):
        with pytest.raises(ScheduleNotFoundError, match=f"no schedule '{schedule_id}'"):
            await call


async def _completed(client: AsyncClient, schedule_id: str) -> list[str]:
    return [t.task_id for t in await client.schedule_runs(schedule_id) if t.status == "completed"]


@pytest.mark.slow
async def test_every_ten_seconds_runs_pauses_triggers_and_deletes(client: AsyncClient, serve, task_queue: str):
    schedule_id = new_id("every10")
    loop = asyncio.get_running_loop()
    async with serve(providers={"default": answering()}):
        created = loop.time()
        await client.create_schedule(schedule_id, "Triage the support inbox", every="10s", task_queue=task_queue,
                                     catchup_window="1m")
        try:
            # Within 35 s at least 3 runs completed, each an ordinary task carrying the schedule's id.
            await eventually(lambda: _has(client, schedule_id, 3), timeout=35 - (loop.time() - created), interval=0.5)
            runs = await client.schedule_runs(schedule_id)
            info = await client.describe_schedule(schedule_id)
            assert {r.task_id for r in info.recent_runs} <= {t.task_id for t in runs}
            assert all(t.task_id.startswith(f"{schedule_id}-") and t.schedule_id == schedule_id for t in runs)
            assert info.timing == "every 10s" and info.next_runs and not info.paused
            first = runs[-1].task_id
            assert (await client.result(first)).answer == "triaged"
            [created_event] = [e.payload for e in await client.events(first) if isinstance(e.payload, ev.TaskCreated)]
            assert created_event.schedule_id == schedule_id and created_event.goal == "Triage the support inbox"
            described = await client.temporal.get_workflow_handle(first).describe()
            assert await described.static_summary() == "Triage the support inbox"
            assert f"**schedule** {schedule_id}" in (await described.static_details() or "")

            # Paused: no new task starts within 25 s.
            await client.pause_schedule(schedule_id, "inbox migration")
            paused = await client.describe_schedule(schedule_id)
            assert paused.paused and paused.note == "inbox migration" and paused.next_runs == []
            before = {r.task_id for r in paused.recent_runs}
            await asyncio.sleep(25)
            assert {r.task_id for r in (await client.describe_schedule(schedule_id)).recent_runs} == before

            # Trigger starts one at once (paused or not).
            await client.trigger_schedule(schedule_id)
            # At once: ~50 ms on a quiet machine; the margin is for a loaded one.
            await eventually(lambda: _new_run(client, schedule_id, before), timeout=30, interval=0.2)
            await client.unpause_schedule(schedule_id)
            assert (await client.describe_schedule(schedule_id)).next_runs
        finally:
            await client.delete_schedule(schedule_id)
        with pytest.raises(ScheduleNotFoundError):
            await client.describe_schedule(schedule_id)
        await eventually(lambda: _absent(client, schedule_id), timeout=10, interval=0.2)
        assert len(await client.schedule_runs(schedule_id)) >= 4  # its tasks stay


async def test_backfill_starts_the_runs_that_were_due(client: AsyncClient, serve, task_queue: str):
    schedule_id = new_id("backfill")
    async with serve(providers={"default": answering()}):
        await client.create_schedule(schedule_id, "Reconcile invoices", cron="0 2 * * *", task_queue=task_queue,
                                     overlap="allow_all")
        try:
            now = datetime.now(timezone.utc)
            await client.backfill_schedule(schedule_id, now - timedelta(days=3), now - timedelta(minutes=1))
            await eventually(lambda: _has(client, schedule_id, 3), timeout=30, interval=0.3)
            info = await client.describe_schedule(schedule_id)
            assert {r.scheduled_at.hour for r in info.recent_runs} == {2}
            with pytest.raises(ConfigurationError, match="must be before its end"):
                await client.backfill_schedule(schedule_id, now, now - timedelta(days=1))
        finally:
            await client.delete_schedule(schedule_id)


async def _has(client: AsyncClient, schedule_id: str, count: int) -> bool:
    return len(await _completed(client, schedule_id)) >= count


async def _new_run(client: AsyncClient, schedule_id: str, before: set[str]) -> bool:
    return bool({r.task_id for r in (await client.describe_schedule(schedule_id)).recent_runs} - before)


async def _absent(client: AsyncClient, schedule_id: str) -> bool:
    return schedule_id not in {s.schedule_id for s in await client.list_schedules()}
