"""The flags of ``noeta schedule create|list|describe|pause|unpause|trigger|backfill|delete``
(goals started as tasks on a clock, docs/schedules.md): every one checked before anything
connects; each task flag of ``noeta start`` configures the runs. The commands themselves:
:mod:`noeta.cli.schedule_commands`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime

#: The overlap policies by name (noeta.client.schedule_spec.OVERLAPS, which a test compares).
OVERLAP_CHOICES = ("skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all")


def duration_text(value: str) -> str:
    """An argparse type: a duration (``90``, ``10s``, ``5m``, ``2h``, ``1d``), checked as the client checks it."""
    from noeta.client.schedule_spec import duration  # the client's one rule, loaded only when used
    from noeta.errors import ConfigurationError

    try:
        duration(value, "duration")
    except ConfigurationError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return value


def moment(value: str) -> datetime:
    """An argparse type: an ISO 8601 time (``2026-12-01T08:00``; without an offset: UTC)."""
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO 8601 time such as 2026-12-01T08:00:00Z, got {value!r}") from None


def add_parser(command: Callable[..., argparse.ArgumentParser], options: Callable[[argparse.ArgumentParser], None],
               text: Callable[[str], str]) -> None:
    """``noeta schedule ...`` on the CLI's parser (``command`` adds a subcommand, ``options`` the
    task flags of ``noeta start``, ``text`` checks a non-empty value)."""
    schedule = command("schedule", "goals started as tasks on a clock: create, list, describe, pause, unpause, "
                                   "trigger, backfill, delete (docs/schedules.md)")
    actions = schedule.add_subparsers(dest="schedule_command", required=True, metavar="ACTION",
                                      help="what to do (`noeta schedule ACTION --help` explains each)")

    def action(name: str, help: str) -> argparse.ArgumentParser:
        cmd = actions.add_parser(name, help=help, description=help)
        cmd.add_argument("schedule", type=text, help="the schedule's id")
        return cmd

    create = action("create", "create a schedule; each run is a task started with the goal and flags given")
    create.add_argument("goal", type=text, help="what each run should do")
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", type=text, help="e.g. '0 8 * * MON-FRI' (weekdays at 08:00, in --timezone)")
    when.add_argument("--every", type=duration_text, metavar="DURATION", help="an interval: 90, 10s, 5m, 2h, 1d")
    create.add_argument("--timezone", type=text, help="IANA name for --cron, e.g. Europe/Berlin (default UTC)")
    create.add_argument("--overlap", choices=OVERLAP_CHOICES, default="skip",
                        help="a run due while the last one runs: skip it (default), buffer it, cancel or terminate "
                             "the last one, or start anyway")
    create.add_argument("--catchup-window", type=duration_text, metavar="DURATION",
                        help="how long after an outage a missed run still starts (default: Temporal's, a year)")
    create.add_argument("--jitter", type=duration_text, metavar="DURATION", help="start each run up to this much later")
    create.add_argument("--paused", action="store_true", help="create it paused")
    create.add_argument("--note", type=text, help="why it is paused")
    create.add_argument("--tool", action="append", type=text, default=[], metavar="NAME",
                        help="a tool registered on the worker that the runs may call (repeatable)")
    create.add_argument("--queue", type=text, help="the workers' task queue (default: NOETA_TASK_QUEUE or 'noeta')")
    options(create)

    listing = actions.add_parser("list", help="the schedules: timing, paused, next run, last run")
    listing.add_argument("--tenant", type=text, help="only this tenant's (NoetaTenant; default: every tenant's)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    action("describe", "a schedule: timing, policies, next runs, recent runs and their task ids").add_argument(
        "--json", action="store_true", help="as one JSON object")
    for name, help in (("pause", "start no run until unpaused"), ("unpause", "let a paused schedule run again")):
        action(name, help).add_argument("--note", type=text, help="why")
    trigger = action("trigger", "start a run now")
    trigger.add_argument("--overlap", choices=OVERLAP_CHOICES, help="instead of the schedule's policy, for this run")
    backfill = action("backfill", "start the runs that were due between --start and --end")
    backfill.add_argument("--start", type=moment, required=True, help="ISO 8601 (without an offset: UTC)")
    backfill.add_argument("--end", type=moment, required=True, help="ISO 8601 (without an offset: UTC)")
    backfill.add_argument("--overlap", choices=OVERLAP_CHOICES, help="instead of the schedule's policy, for these runs")
    action("delete", "delete a schedule (the tasks it started stay)")
