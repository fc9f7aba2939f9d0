"""A chaos run: tasks of several tool steps on worker processes that get SIGKILLed at many points,
and a Temporal dev server (with its SQLite file) that goes down once in the middle.

Used by ``tests/test_chaos.py`` (small and fast) and ``bench/chaos.py`` (bigger, with figures).
Every model call and tool execution is logged by the workers (tests.support.chaos_registry), so the
run reports executions per logical call; "finished twice" means two ``done`` lines for one key.
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.embedded import EmbeddedServer
from noeta.client.options import HostConfig, Options
from noeta.protocols.task import TaskResult

ROOT = Path(__file__).resolve().parents[2]
#: A worker finishing several steps at once logs their ``done`` lines before it records them: a
#: SIGKILL right then leaves a few lines after the step's own.
LINES_IN_FLIGHT = 16


@dataclass
class ChaosReport:
    tasks: int
    completed: int
    kills: int
    outage_seconds: float
    tool_runs: dict[str, int]
    """Executions that finished (``done`` lines), per idempotency key."""
    effects: dict[str, int]
    """Side effects per key (the tool de-duplicates them on its idempotency key)."""
    tool_starts: dict[str, int]
    model_calls: dict[str, int]
    """Provider calls per (task, turn)."""
    kill_recovery: list[float] = field(default_factory=list)
    """Seconds from each kill to the next step started or finished (by any worker)."""
    outage_recovery: float | None = None
    """Seconds from the server's restart to the next step started or finished."""
    results: list[TaskResult] = field(default_factory=list)
    wall_seconds: float = 0.0

    killed: set[str] = field(default_factory=set)
    """Pids of the workers the run killed."""
    last_line: dict[str, int] = field(default_factory=dict)
    """Per pid, the index of its last log line."""
    first_done: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Per key, the log index and pid of its first ``done`` line."""

    def finished_twice(self) -> list[str]:
        return sorted(k for k, n in self.tool_runs.items() if n > 1)

    def unexplained_reruns(self) -> list[str]:
        """Steps that finished twice although the worker that first finished them went on: not the
        instant between a step's end and its record that a SIGKILL can hit (docs/runtime.md)."""
        out = []
        for key in self.finished_twice():
            index, pid = self.first_done[key]
            if pid not in self.killed or self.last_line.get(pid, index) > index + LINES_IN_FLIGHT:
                out.append(key)
        return out


class Workers:
    """Worker processes on one task queue; ``kill`` SIGKILLs one and starts its replacement."""

    def __init__(self, env: dict[str, str], queue: str, count: int) -> None:
        self.env, self.queue, self.count = env, queue, count
        self.procs: list[subprocess.Popen[str]] = []
        self.starting: set[asyncio.Task[None]] = set()
        self.killed: set[str] = set()
        self.spawned = 0

    def _spawn(self) -> subprocess.Popen[str]:
        # Its output goes to a file of its own (worker-N.log in the run's home), so that a run that
        # went wrong can be read afterwards, and never to a pipe nobody reads.
        self.spawned += 1
        out = Path(self.env["NOETA_HOME"]) / f"worker-{self.spawned}.log"
        with open(out, "w") as sink:
            proc = subprocess.Popen(
                [sys.executable, "worker.py", "--registry", "tests.support.chaos_registry:registry", "--task-queue",
                 self.queue],
                cwd=ROOT, env=self.env, stdout=sink, stderr=subprocess.STDOUT, text=True,
            )
        for _ in range(600):
            text = out.read_text()
            if text.startswith("noeta worker on"):
                return proc
            if proc.poll() is not None:
                raise RuntimeError(f"worker did not start: {text}")
            time.sleep(0.05)
        proc.kill()
        raise RuntimeError(f"worker did not announce itself within 30 s: {out.read_text()}")

    async def start(self) -> None:
        self.procs = list(await asyncio.gather(*(asyncio.to_thread(self._spawn) for _ in range(self.count))))

    async def kill(self, rng: random.Random, pid: str | None = None) -> None:
        """SIGKILL a running worker (the one with ``pid`` if it still runs); its replacement
        starts in the background (one always runs)."""
        while len(self.procs) < 2 and self.starting:
            await asyncio.wait(self.starting)
        chosen = [i for i, proc in enumerate(self.procs) if str(proc.pid) == pid]
        victim = self.procs.pop(chosen[0] if chosen else rng.randrange(len(self.procs)))
        self.killed.add(str(victim.pid))
        victim.send_signal(signal.SIGKILL)
        await asyncio.to_thread(victim.wait)
        task = asyncio.create_task(self._replace())
        self.starting.add(task)
        task.add_done_callback(self.starting.discard)

    async def _replace(self) -> None:
        # A worker started while the server is down cannot connect and exits; as a supervisor
        # (systemd, Kubernetes) would, start it again.
        for _ in range(300):
            try:
                self.procs.append(await asyncio.to_thread(self._spawn))
                return
            except RuntimeError:
                await asyncio.sleep(1.0)
        raise RuntimeError("no worker could be started for 300 attempts")

    async def stop(self) -> None:
        if self.starting:
            await asyncio.wait(self.starting)
        for proc in self.procs:
            proc.kill()
            proc.wait()


def histogram(counts: dict[str, int]) -> str:
    """How many keys have each count: ``1×: 30, 2×: 1``."""
    spread = collections.Counter(counts.values())
    return ", ".join(f"{n}×: {spread[n]}" for n in sorted(spread))


def read_log(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


def read_effects(log: Path) -> dict[str, int]:
    """Side effects per key, from the effect files the tool made (tests.support.chaos_registry):
    unlike the ``effect`` log line after each, a kill cannot separate a file from its key."""
    folder = Path(f"{log}.effects")
    made = collections.Counter(f.read_text() for f in folder.iterdir()) if folder.exists() else collections.Counter()
    return dict(made)


def lines(log: Path, kind: str) -> int:
    return sum(1 for parts in read_log(log) if parts[0] == kind)


def tally(log: Path, report: ChaosReport) -> None:
    done: collections.Counter[str] = collections.Counter()
    starts: collections.Counter[str] = collections.Counter()
    models: collections.Counter[str] = collections.Counter()
    for index, parts in enumerate(read_log(log)):
        report.last_line[parts[-1]] = index
        if parts[0] == "done":
            done[parts[1]] += 1
            report.first_done.setdefault(parts[1], (index, parts[-1]))
        elif parts[0] == "start":
            starts[parts[1]] += 1
        elif parts[0] == "model":
            models[f"{parts[1]}/{parts[2]}"] += 1
    report.tool_runs, report.tool_starts, report.effects, report.model_calls = (
        dict(done), dict(starts), read_effects(log), dict(models)
    )


def progress(log: Path) -> int:
    return sum(1 for parts in read_log(log) if parts[0] in ("start", "done"))


async def wait_for_progress(log: Path, timeout: float) -> float | None:
    """Seconds until a step starts or finishes after now (None: not within ``timeout``): after a
    kill, how soon the interrupted work is picked up again."""
    after = progress(log)
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if progress(log) > after:
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    return None


async def run_chaos(
    home: Path,
    *,
    tasks: int = 4,
    steps: int = 3,
    kills: int = 20,
    workers: int = 2,
    outage_seconds: float = 5.0,
    outage_after_kill: int | None = None,
    seed: int = 7,
    work_seconds: float = 0.8,
    timeout: float = 600.0,
    server_args: tuple[str, ...] = (),
) -> ChaosReport:
    """Run ``tasks`` tasks of ``steps`` tool steps each while killing workers ``kills`` times, and
    stop the server for ``outage_seconds`` after kill number ``outage_after_kill`` (default: half way).
    ``server_args`` go to ``temporal server start-dev`` (each time it starts)."""
    rng = random.Random(seed)
    log = home / "chaos.log"
    server = EmbeddedServer(home / "temporal", headless=True, extra_args=server_args).start()
    settings = Settings(temporal_address=server.address, home=home)
    client = await AsyncClient.connect(HostConfig(settings=settings))
    env = {**os.environ, "TEMPORAL_ADDRESS": server.address, "NOETA_HOME": str(home), "NOETA_CHAOS_LOG": str(log),
           "NOETA_CHAOS_WORK_SECONDS": str(work_seconds), "NOETA_CHAOS_GATE": str(home / "gate"),
           "PYTHONPATH": str(ROOT)}
    queue = f"chaos-{rng.randrange(10**8)}"
    pool = Workers(env, queue, workers)
    began = time.monotonic()
    report = ChaosReport(tasks, 0, 0, outage_seconds, {}, {}, {}, {})
    outage_at = kills // 2 if outage_after_kill is None else outage_after_kill
    recoveries: list[asyncio.Task[float | None]] = []
    try:
        await pool.start()
        task_ids = [await client.start(f"steps={steps}", Options(provider="chaos", allowed_tools=["work"]),
                                       task_queue=queue) for _ in range(tasks)]
        results = asyncio.gather(*(client.result(t) for t in task_ids))
        for k in range(kills):
            # Several tasks run at once, so a kill at a random moment mostly lands inside steps;
            # the last step of every task waits at the gate, so the run outlasts the kills.
            await asyncio.sleep(rng.uniform(0.2, 0.6))
            recoveries.append(asyncio.create_task(wait_for_progress(log, 120)))
            await pool.kill(rng)
            report.kills += 1
            if k + 1 == outage_at and outage_seconds > 0:
                server.stop()
                await asyncio.sleep(outage_seconds)
                server = EmbeddedServer(home / "temporal", headless=True, port=server.port, extra_args=server_args).start()
                report.outage_recovery = await wait_for_progress(log, 120)
        (home / "gate").touch()
        report.results = list(await asyncio.wait_for(results, timeout))
        report.completed = sum(1 for r in report.results if r.status == "completed")
        report.kill_recovery = [r for r in await asyncio.gather(*recoveries) if r is not None]
    finally:
        for task in recoveries:
            task.cancel()
        await pool.stop()
        server.stop()
    report.killed = pool.killed
    tally(log, report)
    report.wall_seconds = time.monotonic() - began
    return report
