"""A kill loop on the fast path: tasks whose tool runs as a local activity (and, if asked, whose
model calls do too) on worker processes, one of which is SIGKILLed 0–200 ms after each step
finishes — the moment a chain of local calls is most likely to be lost with its workflow task.

Used by ``tests/test_kill_loop.py`` (a few kills) and ``bench/kill_loop.py`` (20 and more, with
figures). The workers log every model call and tool execution (tests.support.chaos_registry); a
finished step that ran again, or a model turn asked again, after the worker that first did it had
moved on (it logged a later line of the same task) is a repeat no record explains.
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.embedded import EmbeddedServer
from noeta.client.options import HostConfig, Options
from noeta.protocols.task import TaskResult
from tests.support.chaos import ROOT, Workers, read_effects, read_log

#: The tool every step of a kill-loop task runs (``local=True``).
LOCAL_TOOL = "work_local"


@dataclass
class KillLoopReport:
    kills: int = 0
    results: list[TaskResult] = field(default_factory=list)
    tool_runs: dict[str, int] = field(default_factory=dict)
    """Executions that finished (``done`` lines), per idempotency key."""
    effects: dict[str, int] = field(default_factory=dict)
    model_calls: dict[str, int] = field(default_factory=dict)
    """Provider calls per ``task/turn``."""
    recovery: list[float] = field(default_factory=list)
    """Seconds from each kill to the next step finished (by any worker)."""
    unexplained: list[str] = field(default_factory=list)
    """Steps (tool keys, ``task/turn`` of model calls) repeated although their first worker went on."""
    wall_seconds: float = 0.0

    @property
    def repeated_tools(self) -> list[str]:
        return sorted(k for k, n in self.tool_runs.items() if n > 1)

    @property
    def repeated_model_turns(self) -> list[str]:
        return sorted(k for k, n in self.model_calls.items() if n > 1)


def _task_of_key(key: str) -> str:
    """The task of an idempotency key ``task/run/call``."""
    return key.rsplit("/", 2)[0]


def tally(log: Path, killed: set[str], report: KillLoopReport) -> None:
    """Count executions per step and find the repeats no kill explains: a step done again although
    the worker that first did it logged a later line of the same task (so it had gone on, and the
    step's record was written)."""
    done: collections.Counter[str] = collections.Counter()
    models: collections.Counter[str] = collections.Counter()
    first: dict[str, tuple[int, str, str]] = {}  # step -> (line, pid, task)
    last_of_task: dict[tuple[str, str], int] = {}  # (pid, task) -> last line
    for index, parts in enumerate(read_log(log)):
        kind, pid = parts[0], parts[-1]
        if kind == "model":
            step, task = f"{parts[1]}/{parts[2]}", parts[1]
            models[step] += 1
        elif kind in ("start", "done", "effect"):
            step, task = parts[1], _task_of_key(parts[1])
            if kind == "done":
                done[step] += 1
        else:
            continue
        last_of_task[(pid, task)] = index
        if kind in ("model", "done"):
            first.setdefault(step, (index, pid, task))
    report.tool_runs, report.effects, report.model_calls = dict(done), read_effects(log), dict(models)
    repeated = [k for k, n in done.items() if n > 1] + [k for k, n in models.items() if n > 1]
    report.unexplained = sorted(
        step for step in repeated
        if (at := first[step])[1] not in killed or last_of_task[(at[1], at[2])] > at[0]
    )


async def next_done(log: Path, seen: int, timeout: float) -> tuple[int, str] | None:
    """Wait for a ``done`` line past the first ``seen``: (how many there are now, its worker's pid)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        done = [parts for parts in read_log(log) if parts[0] == "done"]
        if len(done) > seen:
            return len(done), done[-1][-1]
        await asyncio.sleep(0.01)
    return None


async def run_kill_loop(
    home: Path,
    *,
    tasks: int = 2,
    steps: int = 10,
    kills: int = 20,
    workers: int = 2,
    local_model: bool = True,
    seed: int = 11,
    timeout: float = 900.0,
    server_args: tuple[str, ...] = (),
) -> KillLoopReport:
    """Run ``tasks`` tasks of ``steps`` local-tool steps, SIGKILLing the worker that finished a
    step 0–200 ms after it did, ``kills`` times (fewer if the tasks end first), then let them end."""
    rng = random.Random(seed)
    log = home / "chaos.log"
    server = EmbeddedServer(home / "temporal", headless=True, extra_args=server_args).start()
    client = await AsyncClient.connect(HostConfig(settings=Settings(temporal_address=server.address, home=home)))
    env = {**os.environ, "TEMPORAL_ADDRESS": server.address, "NOETA_HOME": str(home), "NOETA_CHAOS_LOG": str(log),
           "PYTHONPATH": str(ROOT)}
    pool = Workers(env, f"kill-loop-{rng.randrange(10**8)}", workers)
    report = KillLoopReport()
    began = time.monotonic()
    options = Options(provider="chaos", allowed_tools=[LOCAL_TOOL], model_local_activity=local_model)
    try:
        await pool.start()
        task_ids = [await client.start(f"steps={steps} tool={LOCAL_TOOL}", options, task_queue=pool.queue)
                    for _ in range(tasks)]
        results = asyncio.ensure_future(asyncio.gather(*(client.result(t) for t in task_ids)))
        seen, killed_at = 0, None
        while report.kills < kills and not results.done():
            found = await next_done(log, seen, timeout=300)
            if found is None:
                break
            seen, pid = found
            if killed_at is not None:
                report.recovery.append(time.monotonic() - killed_at)
            await asyncio.sleep(rng.uniform(0.0, 0.2))
            await pool.kill(rng, pid=pid)
            killed_at = time.monotonic()
            report.kills += 1
        report.results = list(await asyncio.wait_for(results, timeout))
    finally:
        await pool.stop()
        server.stop()
    tally(log, pool.killed, report)
    report.wall_seconds = time.monotonic() - began
    return report
