"""Noisy-neighbour benchmark: one worker with a few slots; tenant A starts a batch, then tenant B
starts a few tasks, with fairness keys and then (the same run, NOETA_FAIRNESS=off) without; then an
urgent task (priority 1) started behind a queue of ordinary ones (priority 3).

    python bench/noisy_neighbour.py --a 300 --b 10 --ordinary 100

Each task is ``--steps`` model turns calling a tool that works ``--seconds``, then an answer; the
worker runs ``--slots`` activities at once. Prints, per run, how many of A's tasks completed before
B's last one (and before B's first), how many ordinary tasks before the urgent one, and wall times.
The machinery is tests.support.noisy_neighbour, which tests/test_fairness.py runs small.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from noeta.client.client import AsyncClient  # noqa: E402
from noeta.client.config import Settings  # noqa: E402
from noeta.client.embedded import EmbeddedServer  # noqa: E402
from noeta.client.options import HostConfig  # noqa: E402
from noeta.context.content_store import LocalContentStore  # noqa: E402
from tests.support.dev_server import SERVER_ARGS  # noqa: E402
from tests.support.noisy_neighbour import Batch, Outcome, run_batches  # noqa: E402


def first(outcome: Outcome, label: str, other: str) -> int:
    """How many ``other`` tasks completed before the first ``label`` task."""
    return outcome.order[: outcome.order.index(label)].count(other)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", type=int, default=300, help="tenant A's tasks")
    p.add_argument("--b", type=int, default=10, help="tenant B's tasks, started after A's")
    p.add_argument("--ordinary", type=int, default=100, help="priority-3 tasks queued before the urgent one")
    p.add_argument("--steps", type=int, default=2, help="tool turns per task")
    p.add_argument("--seconds", type=float, default=0.5, help="how long the tool works")
    p.add_argument("--slots", type=int, default=10, help="activities the worker runs at once")
    args = p.parse_args()
    print(f"{platform.node()} {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}; {' '.join(sys.argv)}")
    with tempfile.TemporaryDirectory() as home:
        server = EmbeddedServer(Path(home) / "temporal", headless=True, extra_args=SERVER_ARGS).start()
        try:
            settings = Settings(temporal_address=server.address, home=Path(home), task_queue="noisy")
            store = LocalContentStore(Path(home) / "content")
            client = await AsyncClient.connect(HostConfig(settings=settings, content_store=store))
            shape = {"steps": args.steps, "seconds": args.seconds, "slots": args.slots}
            batches = [Batch("A", "tenant-a", args.a), Batch("B", "tenant-b", args.b)]
            for fairness in ("on", "off"):
                os.environ["NOETA_FAIRNESS"] = fairness
                run = await run_batches(client, store, f"noisy-{fairness}", batches, **shape)  # type: ignore[arg-type]
                print(f"fairness {fairness}: A done before B's first {first(run, 'B', 'A')}, before B's last "
                      f"{run.before_last('B', 'A')} of {args.a}; wall {run.seconds:.0f} s")
            os.environ["NOETA_FAIRNESS"] = "on"
            urgent = [Batch("ordinary", "default", args.ordinary, 3), Batch("urgent", "default", 1, 1)]

            async def queued() -> None:
                return None

            run = await run_batches(client, store, "noisy-priority", urgent, on_queued=queued, **shape)  # type: ignore[arg-type]
            print(f"priority: ordinary done before the urgent one {run.before_last('urgent', 'ordinary')} of "
                  f"{args.ordinary}; wall {run.seconds:.0f} s")
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
