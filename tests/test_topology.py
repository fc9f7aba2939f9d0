"""The multi-host topology, for real: the Temporal server, a PostgreSQL content store, two
``noeta worker`` processes, ``noeta serve`` and a client in another process (this one, over HTTP).
Both workers are restarted one after the other (SIGTERM, graceful, each while it runs a tool)
during a 20-step task: the task completes, nothing is lost, no finished tool runs again.

Skipped without PostgreSQL, unless NOETA_REQUIRE_POSTGRES=1 (CI) makes that a failure.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.postgres import DSN, require_postgres
from tests.support.processes import ROOT, free_port, start_worker, worker_env
from tests.support.topology import STEPS
from tests.support.waiting import eventually

psycopg = pytest.importorskip("psycopg")

REGISTRY = "tests.support.topology:registry"


@pytest.fixture
def executions() -> Iterator[str]:
    require_postgres()
    table = f"noeta_topology_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {table} (id serial PRIMARY KEY, call_key text, event text, attempt int, pid int)"
        )
    yield table
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def rows(table: str) -> list[tuple[str, str, int, int]]:
    with psycopg.connect(DSN) as conn:
        return conn.execute(f"SELECT call_key, event, attempt, pid FROM {table} ORDER BY id").fetchall()


def running_tool_pid(table: str) -> int | None:
    """The pid of the worker running a tool right now, if any."""
    started: dict[str, int] = {}
    for key, event, _, pid in rows(table):
        if event == "start":
            started[key] = pid
        else:
            started.pop(key, None)
    return next(iter(started.values()), None)


def start_serve(env: dict[str, str], port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "noeta.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


@pytest.mark.slow
async def test_rolling_restart_of_both_workers_during_a_20_step_task(
    settings, data_dir: Path, task_queue: str, executions: str, tmp_path: Path
):
    began = time.monotonic()
    env = worker_env(
        TEMPORAL_ADDRESS=settings.temporal_address,
        NOETA_HOME=str(tmp_path / "home"),
        NOETA_CONTENT_STORE=DSN,
        NOETA_TASK_QUEUE=task_queue,
        NOETA_TEST_POSTGRES=DSN,
        NOETA_TOPOLOGY_TABLE=executions,
    )
    grace = ("--shutdown-grace-seconds", "30")
    port = free_port()
    processes: list[subprocess.Popen[str]] = []
    try:
        serve = start_serve(env, port)
        processes.append(serve)
        old = list(await asyncio.gather(*(asyncio.to_thread(start_worker, env, task_queue, REGISTRY, *grace) for _ in range(2))))
        processes += old
        api = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30)

        async def api_up() -> bool:
            try:
                return (await api.get("/tasks", params={"limit": 1})).status_code == 200
            except httpx.TransportError:
                return False

        await eventually(api_up, timeout=60)
        created = await api.post(
            "/tasks",
            json={"goal": "count", "options": {"provider": "scripted", "allowed_tools": ["count_step"], "max_turns": 30}},
        )
        assert created.status_code == 201, created.text
        task_id = created.json()["task_id"]

        # Rolling restart: stop each old worker while it runs a tool (the second one as soon as it
        # gets one, or near the end of the task), start its replacement at once.
        busy = []
        for _ in range(2):
            remaining = {p.pid: p for p in old if p.pid not in busy and p.returncode is None}
            chosen: list[subprocess.Popen[str]] = []

            def pick(
                remaining: dict[int, subprocess.Popen[str]] = remaining,
                chosen: list[subprocess.Popen[str]] = chosen,
            ) -> bool:
                pid = running_tool_pid(executions)
                if pid in remaining:
                    chosen.append(remaining[pid])
                    busy.append(pid)
                elif sum(1 for r in rows(executions) if r[1] == "done") >= STEPS - 3:
                    chosen.append(next(iter(remaining.values())))
                return bool(chosen)

            await eventually(pick, timeout=60)
            chosen[0].send_signal(signal.SIGTERM)
            processes.append(await asyncio.to_thread(start_worker, env, task_queue, REGISTRY, *grace))
            assert await asyncio.to_thread(chosen[0].wait, 60) == 0
            remaining.pop(chosen[0].pid)
        assert all(p.returncode == 0 for p in old)

        async def finished() -> dict | None:
            body = (await api.get(f"/tasks/{task_id}")).json()
            return body if body.get("result") else None

        await eventually(finished, timeout=120)
        task = await finished()
        messages = (await api.get(f"/tasks/{task_id}/messages")).json()
    finally:
        for proc in processes:
            proc.terminate()
        for proc in processes:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert task is not None
    assert (task["result"]["status"], task["result"]["answer"]) == ("completed", f"counted {STEPS} steps")
    log = rows(executions)
    # Engine-assigned keys: {task_id}/{run_id}/{n} for the run's n-th tool call.
    run = log[0][0].rsplit("/", 1)[0]
    assert run.startswith(f"{task_id}/")
    keys = [f"{run}/{n + 1}" for n in range(STEPS)]
    # Every step's tool ran exactly once, to its end: none lost, none repeated.
    assert sorted(k for k, event, _, _ in log if event == "start") == sorted(keys)
    assert sorted(k for k, event, _, _ in log if event == "done") == sorted(keys)
    # The workers stopped while running a tool finished that tool themselves.
    assert busy, "no worker was stopped while it ran a tool"
    finished_by = {key: pid for key, event, _, pid in log if event == "done"}
    assert set(busy) <= set(finished_by.values())
    results = [m for m in messages if m["type"] == "ToolResultView"]
    assert [r["output"] for r in results] == [f"step {n} counted" for n in range(STEPS)]
    print(f"topology run: {time.monotonic() - began:.1f} s; stopped mid-tool: {len(busy)} of 2 workers")
