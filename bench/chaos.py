"""Chaos benchmark: tasks of several tool steps while worker processes are SIGKILLed over and over
and the Temporal dev server goes down once for a while.

    python bench/chaos.py --tasks 12 --steps 4 --kills 40 --outage 90

Prints tasks completed, executions per logical call (tool steps that finished more than once,
starts per step, provider calls per turn) and recovery times (from each kill, and from the
server's restart, to the next step started or finished). The machinery is tests.support.chaos, which
tests/test_chaos.py runs small.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.chaos import histogram, run_chaos  # noqa: E402


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--kills", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--outage", type=float, default=30.0, help="seconds the server stays down")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="noeta-chaos-"))
    print(f"# {time.strftime('%Y-%m-%d')} · {platform.machine()} · Python {platform.python_version()} · {home}")
    report = await run_chaos(
        home, tasks=args.tasks, steps=args.steps, kills=args.kills, workers=args.workers,
        outage_seconds=args.outage, seed=args.seed,
    )
    recover = sorted(report.kill_recovery)
    print(f"tasks completed          {report.completed}/{report.tasks}")
    print(f"worker kills             {report.kills}; server down {report.outage_seconds:g} s once")
    print(f"tool steps               {len(report.tool_runs)} (expected {args.tasks * args.steps})")
    print(f"finished runs per step   {histogram(report.tool_runs)}")
    print(f"finished twice           {len(report.finished_twice())} "
          f"(of which not explained by a kill between a step's end and its record: {len(report.unexplained_reruns())})")
    print(f"side effects per step    {histogram(report.effects)} (de-duplicated on the idempotency key)")
    print(f"starts per step          {histogram(report.tool_starts)} (a killed run starts again)")
    print(f"provider calls per turn  {histogram(report.model_calls)}")
    if recover:
        print(
            f"kill -> steps go on      median {statistics.median(recover):.1f} s, "
            f"max {recover[-1]:.1f} s over {len(recover)} kills"
        )
    if report.outage_recovery is not None:
        print(f"restart -> steps go on   {report.outage_recovery:.1f} s")
    print(f"wall                     {report.wall_seconds:.0f} s")


if __name__ == "__main__":
    asyncio.run(main())
