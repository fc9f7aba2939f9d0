"""A ramp of agent versions and its rollback: how new tasks started by name split between them.

    python bench/agent_ramp.py [--tasks 100] [--percent 50]

One embedded dev server and an in-process worker; the agent catalog of the versioned-agent tests
(``triage`` 1 thorough, 2 terse) with a scripted provider that answers by the system prompt, so a
task costs no model time. Version 1 is current and version 2 ramps at ``--percent``: ``--tasks``
tasks are started as ``triage`` (``client.start(goal, agent="triage")``) at once and each one's
version is read back from what it recorded (its TaskCreated event) and checked against its answer.
Then the rollback (the ramp ends) and the same number of tasks again. Prints the split of each
round, its wall time, and what ``noeta versions`` then reports for the agent's versions.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import platform
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from noeta.client.client import AsyncClient  # noqa: E402
from noeta.client.version_report import agent_versions  # noqa: E402
from noeta.worker import Registry, build_worker  # noqa: E402
from tests.support.agents import agents, provider  # noqa: E402

from embedded import embedded_server, host_at  # noqa: E402 (bench/, beside this script)


async def one(client: AsyncClient, goal: str, queue: str) -> int:
    """Start ``goal`` as ``triage``; the version it recorded (checked against its answer)."""
    task_id = await client.start(goal, agent="triage", task_queue=queue)
    answer = (await client.result(task_id)).answer
    [created] = [e.payload for e in await client.events(task_id) if e.type == "TaskCreated"]
    assert (answer == "short.") == (created.agent_version == 2), (task_id, answer, created.agent_version)
    return int(created.agent_version)


async def round_of(client: AsyncClient, label: str, tasks: int, queue: str) -> collections.Counter[int]:
    began = time.perf_counter()
    versions = collections.Counter(await asyncio.gather(*(one(client, f"{label} ticket {i}", queue) for i in range(tasks))))
    elapsed = time.perf_counter() - began
    split = ", ".join(f"v{v}: {n} ({100 * n / tasks:.0f} %)" for v, n in sorted(versions.items()))
    print(f"{label:<22} {tasks} tasks  {split}  ({elapsed:.1f} s)", flush=True)
    return versions


async def main(args: argparse.Namespace) -> None:
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.tasks} tasks a round, version 2 ramping at {args.percent:g} %", flush=True)
    with embedded_server() as (address, home):
        client = await AsyncClient.connect(host_at(address, home))
        client.agents = agents
        queue = f"bench-ramp-{uuid.uuid4().hex[:8]}"
        registry = Registry.of(providers=[provider], content_store=client.content_store)
        async with build_worker(client.temporal, registry, queue):
            agents.set_current("triage", 1)
            agents.ramp("triage", 2, args.percent)
            ramped = await round_of(client, f"ramp 2 at {args.percent:g} %", args.tasks, queue)
            agents.ramp("triage", 2, 0)  # rollback: version 1 takes every new task again
            rolled = await round_of(client, "after the rollback", args.tasks, queue)
        # Every task has ended; visibility says so a moment later.
        deadline = time.monotonic() + 30
        while any(u.running for u in await agent_versions(client.temporal, agents)) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        for use in await agent_versions(client.temporal, agents):
            print(f"noeta versions: {use.version} running {use.running} {use.routing or '-'} "
                  f"{'may be retired' if use.retirable else 'keep'}")
        await client.close()
    low, high = 0.35 * args.tasks, 0.65 * args.tasks
    ok = low <= ramped[2] <= high and rolled[2] == 0
    print("within 35-65 % on the ramp and none on version 2 after the rollback:", "yes" if ok else "NO")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--percent", type=float, default=50)
    asyncio.run(main(parser.parse_args()))
