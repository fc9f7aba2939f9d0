"""Kill-loop benchmark on the fast path: the worker that finished a step is SIGKILLed 0–200 ms
later, again and again, on tasks whose tool runs as a local activity (with model calls as local
activities too, or as ordinary activities).

    python bench/kill_loop.py --tasks 3 --steps 12 --kills 24

Prints, for each kind of model call, tasks completed, kills, finished tool executions and model
answers per step (a repeat is a step done twice), and how many repeats no kill explains (the worker
that first did the step had gone on to the next one). The machinery is tests.support.kill_loop,
which tests/test_kill_loop.py runs small.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.chaos import histogram  # noqa: E402
from tests.support.kill_loop import run_kill_loop  # noqa: E402


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--kills", type=int, default=24)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=11)
    print(f"# {time.strftime('%Y-%m-%d')} · {platform.machine()} · Python {platform.python_version()}")
    parser.add_argument("--only", choices=["local", "ordinary"], default=None, help="one kind of model call")
    args = parser.parse_args()
    kinds = [kind for kind in (True, False) if args.only is None or args.only == ("local" if kind else "ordinary")]
    for local_model in kinds:
        home = Path(tempfile.mkdtemp(prefix="noeta-kill-loop-"))
        report = await run_kill_loop(home, tasks=args.tasks, steps=args.steps, kills=args.kills,
                                     workers=args.workers, local_model=local_model, seed=args.seed)
        done = sum(1 for r in report.results if r.status == "completed")
        print(f"## local tool, model calls {'local' if local_model else 'ordinary'}")
        print(f"tasks completed          {done}/{args.tasks} in {report.wall_seconds:.0f} s")
        print(f"worker kills             {report.kills} (each 0–200 ms after a step finished)")
        print(f"tool steps               {len(report.tool_runs)} (expected {args.tasks * args.steps})")
        print(f"finished runs per step   {histogram(report.tool_runs)}")
        print(f"side effects per step    {histogram(report.effects)}")
        print(f"model answers per turn   {histogram(report.model_calls)}")
        recovery = sorted(report.recovery)
        if recovery:
            print(f"kill to next step done   median {recovery[len(recovery) // 2]:.1f} s, max {recovery[-1]:.1f} s")
        print(f"repeats                  {len(report.repeated_tools)} tool, {len(report.repeated_model_turns)} model "
              f"(not explained by a kill between a step's end and its record: {len(report.unexplained)})")


if __name__ == "__main__":
    asyncio.run(main())
