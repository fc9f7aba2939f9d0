"""Kill and outage: worker processes SIGKILLed at 20 points and the Temporal server restarted once
during a run. Every task completes and every finished tool call ran once (tests.support.chaos)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.chaos import run_chaos
from tests.support.dev_server import SERVER_ARGS


@pytest.mark.server
@pytest.mark.slow
async def test_every_finished_call_ran_once_through_20_kills_and_a_server_restart(tmp_path: Path):
    report = await run_chaos(tmp_path, tasks=6, steps=3, kills=20, workers=4, outage_seconds=3.0,
                             server_args=SERVER_ARGS)
    assert report.kills == 20
    assert [(r.status, r.answer) for r in report.results] == [("completed", "done 3")] * 6
    # One key per logical call (6 tasks x 3 steps); each call's side effect happened once.
    assert len(report.tool_runs) == 18
    assert report.effects == {key: 1 for key in report.tool_runs}
    # A step finished twice only where its worker was SIGKILLed right after finishing it, before
    # recording it (the one instant docs/runtime.md names); never after it was recorded.
    assert report.unexplained_reruns() == []
    assert report.outage_recovery is not None  # steps went on after the server came back
