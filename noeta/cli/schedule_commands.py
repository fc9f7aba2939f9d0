"""``noeta schedule ACTION``: goals started as tasks on a clock (docs/schedules.md), one call of
the client's schedule API each, and how a schedule is printed (flags: :mod:`noeta.cli.schedule_parser`)."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from pydantic_core import to_jsonable_python

from noeta.cli.task_flags import identity_of, task_options
from noeta.client.client import AsyncClient
from noeta.client.schedule_info import ScheduleInfo


def _when(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%SZ") if t is not None else "-"


def schedule_line(s: ScheduleInfo) -> str:
    """One schedule of ``noeta schedule list``: id, state, timing, next run, last run's task, goal."""
    state = "paused" if s.paused else "active"
    last = s.recent_runs[-1].task_id if s.recent_runs else "-"
    goal = (s.goal or "")[:60]
    return f"{s.schedule_id:<24} {state:<7} {s.timing:<32} next {_when(s.next_runs[0] if s.next_runs else None)}  last {last}  {goal}"


def schedule_text(s: ScheduleInfo) -> str:
    """``noeta schedule describe``: the schedule, its next runs and its recent runs' tasks."""
    lines = [
        schedule_line(s),
        f"  overlap {s.overlap}  catch-up window {s.catchup_window_seconds or 0:g}s  jitter {s.jitter_seconds or 0:g}s  "
        f"queue {s.task_queue}  tenant {s.tenant}",
        f"  runs {s.runs_total}  skipped (overlap) {s.skipped_overlap}  missed (catch-up) {s.missed_catchup}"
        + (f"  note: {s.note}" if s.note else ""),
        *(f"  next {_when(t)}" for t in s.next_runs),
        *(f"  ran  {_when(r.scheduled_at)}  task {r.task_id}" + ("  (running)" if r.task_id in s.running else "")
          for r in s.recent_runs),
    ]
    return "\n".join(lines)


def _json(item: Any) -> str:
    return json.dumps(to_jsonable_python(item), ensure_ascii=False)


async def cmd_schedule(client: AsyncClient, args: argparse.Namespace) -> int:
    """``noeta schedule ACTION``: one call of the client's schedule API, and what it did."""
    act, schedule_id, who = args.schedule_command, str(getattr(args, "schedule", "")), identity_of(args)
    if act == "create":
        options = task_options(args, provider=args.provider, allowed_tools=list(args.tool) or None)
        print(await client.create_schedule(
            schedule_id, args.goal, options, cron=args.cron, every=args.every, timezone=args.timezone,
            overlap=args.overlap, catchup_window=args.catchup_window, jitter=args.jitter, paused=args.paused,
            note=args.note, task_queue=args.queue, identity=who,
        ))
    elif act == "list":
        found = await client.list_schedules(tenant=args.tenant)
        for s in found:
            print(_json(s) if args.json else schedule_line(s))
        if not found and not args.json:
            print("no schedules")
    elif act == "describe":
        info = await client.describe_schedule(schedule_id)
        print(_json(info) if args.json else schedule_text(info))
    elif act in ("pause", "unpause"):
        call = client.pause_schedule if act == "pause" else client.unpause_schedule
        await call(schedule_id, args.note, identity=who)
        print(f"schedule {schedule_id} {act}d")
    elif act == "trigger":
        await client.trigger_schedule(schedule_id, overlap=args.overlap, identity=who)
        print(f"schedule {schedule_id}: a run starts now (noeta schedule describe {schedule_id} shows its task)")
    elif act == "backfill":
        await client.backfill_schedule(schedule_id, args.start, args.end, overlap=args.overlap, identity=who)
        print(f"schedule {schedule_id}: the runs due from {args.start.isoformat()} to {args.end.isoformat()} start")
    else:
        await client.delete_schedule(schedule_id, identity=who)
        print(f"schedule {schedule_id} deleted (its tasks stay)")
    return 0
