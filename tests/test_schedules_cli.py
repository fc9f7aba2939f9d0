"""``noeta schedule ...`` in-process against the dev server and a real worker: create, list,
describe, trigger (a run completes, a task carrying the schedule's id), pause, unpause, backfill,
delete; user errors are one line and exit code 2, bad flags are refused before anything connects."""

from __future__ import annotations

import json

import pytest

from noeta.cli.schedule_parser import OVERLAP_CHOICES
from noeta.client.client import AsyncClient
from noeta.client.schedule_spec import OVERLAPS
from tests.support.waiting import eventually
from tests.test_cli_commands import cli_env, noeta, one_error_line  # noqa: F401 (cli_env: a fixture)
from tests.test_schedules import answering, new_id


def test_the_cli_offers_the_clients_overlap_policies():
    assert OVERLAP_CHOICES == OVERLAPS


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["schedule", "create", "s", "goal"], "one of the arguments --cron --every is required"),
        (["schedule", "create", "s", "goal", "--cron", "0 8 * * *", "--every", "1h"], "not allowed with argument"),
        (["schedule", "create", "s", "goal", "--every", "soon"], "must be a duration such as 10s"),
        (["schedule", "create", "s", "goal", "--every", "1m", "--overlap", "queue"], "invalid choice: 'queue'"),
        (["schedule", "backfill", "s", "--start", "yesterday", "--end", "2026-01-01"], "expected an ISO 8601 time"),
        (["schedule", "pause"], "the following arguments are required: schedule"),
    ],
)
def test_bad_flags_are_refused_before_anything_connects(capsys, args: list[str], says: str):
    from noeta.cli import run

    with pytest.raises(SystemExit) as exited:
        run(args)
    assert exited.value.code == 2 and says in capsys.readouterr().err


async def test_create_list_trigger_describe_pause_delete(
    cli_env, capsys, client: AsyncClient, serve, task_queue  # noqa: F811 (the imported fixture)
):
    schedule_id = new_id("cli")
    async with serve(providers={"default": answering()}):
        code, out, _ = await noeta(capsys, "schedule", "create", schedule_id, "Triage the support inbox",
                                   "--every", "10s", "--overlap", "buffer_one", "--catchup-window", "10m",
                                   "--max-turns", "5")
        assert (code, out.strip()) == (0, schedule_id)
        code, _, err = await noeta(capsys, "schedule", "create", schedule_id, "again", "--cron", "0 8 * * *")
        assert code == 2 and "choose another id" in one_error_line(err, "ScheduleAlreadyExistsError")
        try:
            await eventually(lambda: _listed(capsys, schedule_id), timeout=10, interval=0.2)
            code, out, _ = await noeta(capsys, "schedule", "trigger", schedule_id, "--overlap", "allow_all")
            assert code == 0 and "a run starts now" in out
            await eventually(lambda: _completed(client, schedule_id), timeout=20, interval=0.3)
            [run] = [t for t in await client.schedule_runs(schedule_id) if t.status == "completed"][:1]
            code, out, _ = await noeta(capsys, "schedule", "describe", schedule_id)
            assert code == 0 and "every 10s" in out and "overlap buffer_one" in out and f"task {run.task_id}" in out
            code, out, _ = await noeta(capsys, "schedule", "describe", schedule_id, "--json")
            described = json.loads(out)
            assert described["catchup_window_seconds"] == 600 and described["goal"] == "Triage the support inbox"

            assert (await noeta(capsys, "schedule", "pause", schedule_id, "--note", "migration"))[0] == 0
            info = await client.describe_schedule(schedule_id)
            assert info.paused and info.note == "migration"
            code, out, _ = await noeta(capsys, "schedule", "unpause", schedule_id)
            assert code == 0 and not (await client.describe_schedule(schedule_id)).paused
            code, _, err = await noeta(capsys, "schedule", "backfill", schedule_id, "--start", "2026-01-01T00:00:00",
                                       "--end", "2025-12-31T00:00:00")
            assert code == 2 and "must be before its end" in one_error_line(err, "ConfigurationError")
        finally:
            code, out, _ = await noeta(capsys, "schedule", "delete", schedule_id)
        assert code == 0 and "deleted" in out
        code, _, err = await noeta(capsys, "schedule", "describe", schedule_id)
        assert code == 2 and f"no schedule '{schedule_id}'" in one_error_line(err, "ScheduleNotFoundError")
        await eventually(lambda: _unlisted(capsys, schedule_id), timeout=10, interval=0.2)


async def _listed(capsys, schedule_id: str) -> bool:
    code, out, _ = await noeta(capsys, "schedule", "list")
    return code == 0 and any(line.startswith(schedule_id) and "active" in line for line in out.splitlines())


async def _unlisted(capsys, schedule_id: str) -> bool:
    code, out, _ = await noeta(capsys, "schedule", "list")
    return code == 0 and schedule_id not in out


async def _completed(client: AsyncClient, schedule_id: str) -> bool:
    return any(t.status == "completed" for t in await client.schedule_runs(schedule_id))
