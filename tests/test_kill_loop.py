"""Exactly once on the fast path: a worker SIGKILLed 0–200 ms after a step finished, again and
again, on tasks whose tool runs as a local activity — with model calls as local activities too,
and as ordinary activities. Every task completes and no finished step runs again: a local call
lost with its workflow task starts again at attempt 1 on the next worker, which finds the step's
record and returns it (tests.support.kill_loop; bench/kill_loop.py runs 20 kills and more)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.dev_server import SERVER_ARGS
from tests.support.kill_loop import run_kill_loop


@pytest.mark.slow
@pytest.mark.server
@pytest.mark.parametrize("local_model", [True, False], ids=["local-model-calls", "ordinary-model-calls"])
async def test_a_kill_loop_on_local_calls_repeats_no_finished_step(tmp_path: Path, local_model: bool):
    report = await run_kill_loop(tmp_path, tasks=2, steps=12, kills=6, local_model=local_model, server_args=SERVER_ARGS)
    # Kills wait for a finished step; on a loaded machine the surviving worker may finish the tasks
    # before the sixth: at least four must have landed mid-chain.
    assert 4 <= report.kills <= 6
    assert [(r.status, r.answer) for r in report.results] == [("completed", "done 12")] * 2
    # 2 tasks x 12 steps, each side effect once; 13 model turns per task.
    assert len(report.tool_runs) == 24 and report.effects == {key: 1 for key in report.tool_runs}
    assert len(report.model_calls) == 26
    assert report.unexplained == [], (report.tool_runs, report.model_calls)
