"""`noeta run` and `noeta server` as real processes: a run is never served by another worker, it
prints its task's UI link and streams the model's text on a terminal; SIGTERM to `noeta server`
stops the dev server it started."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from noeta.cli.processes import RUN_QUEUE_PREFIX
from noeta.client.client import AsyncClient
from noeta.client.embedded import pid_alive
from tests.support.chat_server import FakeChatServer, Pause, chunks_for, completion

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cli_env(settings, data_dir: Path, task_queue: str) -> dict[str, str]:
    return {
        **os.environ,
        "TEMPORAL_ADDRESS": settings.temporal_address,
        "NOETA_HOME": str(data_dir),
        "NOETA_TASK_QUEUE": task_queue,
        "PYTHONPATH": str(ROOT),
    }


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "noeta.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


def started_task(stderr: str) -> str:
    return stderr.split("task ")[1].split()[0]


@pytest.mark.slow
async def test_noeta_run_is_never_served_by_another_worker(cli_env, client: AsyncClient, task_queue: str):
    # A worker on the shared queue whose "default" provider answers differently.
    worker = subprocess.Popen(
        [sys.executable, "-m", "noeta.cli", "worker", "--registry", "tests.support.registry:other_registry"],
        cwd=ROOT, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = await asyncio.to_thread(worker.stdout.readline)
        assert line.startswith("noeta worker on") and repr(task_queue) in line, line
        env = {**cli_env, "NOETA_TEMPORAL_UI": "http://ui.example:8233"}
        runs = await asyncio.gather(*(
            asyncio.to_thread(cli, env, "run", "what is 20 + 22?", "--registry", "tests.support.registry:cli_registry")
            for _ in range(3)
        ))
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.to_thread(worker.communicate, timeout=60)
    for run in runs:
        assert (run.returncode, run.stdout) == (0, "the answer is 42\n"), run.stderr
        task_id = started_task(run.stderr)
        description = await client.temporal.get_workflow_handle(task_id).describe()
        assert description.task_queue.startswith(RUN_QUEUE_PREFIX) and description.task_queue != task_queue
        assert f"Temporal UI: http://ui.example:8233/namespaces/default/workflows/{task_id}\n" in run.stderr
        assert "Traceback" not in run.stderr


def read_until(fd: int, wanted: str, seen: bytearray, timeout: float = 120) -> str:
    """Read the terminal until ``wanted`` has appeared (fails after a generous timeout)."""
    deadline = time.monotonic() + timeout
    while wanted.encode() not in seen:
        assert time.monotonic() < deadline, f"{wanted!r} never appeared in {seen.decode(errors='replace')!r}"
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the process closed the terminal
                break
            seen += chunk
    return seen.decode(errors="replace")


def test_noeta_run_streams_text_on_a_terminal(cli_env, chat: FakeChatServer):
    release = threading.Event()
    pieces = chunks_for(completion({"content": "Streaming, one piece at a time."}), pieces=3)
    chat.reply([*pieces[:2], Pause(120, until=release), *pieces[2:]])  # the rest waits for the test
    env = {**cli_env, "NOETA_TEST_CHAT_URL": chat.base_url}
    main, child = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "noeta.cli", "run", "stream please", "--registry", "tests.support.registry:terminal_registry"],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=child, stderr=subprocess.PIPE,
    )
    os.close(child)
    seen = bytearray()
    try:
        first = chunks_for(completion({"content": "Streaming, one piece at a time."}), pieces=3)[1]["choices"][0]["delta"]["content"]
        read_until(main, first, seen)  # the first piece is on the screen while the model still runs
        assert not release.is_set() and b"piece at a time." not in seen
        release.set()
        screen = read_until(main, "piece at a time.", seen)
        stderr = process.communicate(timeout=120)[1].decode()
        try:
            screen = read_until(main, "\n", seen, timeout=5)
        finally:
            os.close(main)
    finally:
        release.set()
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert screen.count("Streaming, one piece at a time.") == 1  # streamed, not printed again
    assert "[completed]" in stderr and "Traceback" not in stderr


@pytest.mark.server
def test_sigterm_to_noeta_server_stops_the_dev_server_it_started(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "NOETA_"))}
    env.update(NOETA_HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    process = subprocess.Popen([sys.executable, "-m", "noeta.cli", "server"], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("Temporal dev server at 127.0.0.1:"), (line, process.stderr.read() if process.poll() is not None else "")
        state = json.loads((tmp_path / "temporal" / "server.json").read_text())
        assert pid_alive(state["pid"])
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0 and "Traceback" not in err
    deadline = time.monotonic() + 30
    while pid_alive(state["pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(state["pid"])
    assert not (tmp_path / "temporal" / "server.json").exists()


def test_noeta_run_prints_its_own_progress_and_other_libraries_logs_only_with_v(cli_env, chat: FakeChatServer):
    env = {**cli_env, "NOETA_TEST_CHAT_URL": chat.base_url, "NOETA_LOG_LEVEL": "INFO"}
    run = [sys.executable, "-m", "noeta.cli", "run", "say hi", "--registry", "tests.support.registry:terminal_registry"]
    chat.reply(completion({"content": "hi"}))
    quiet = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    chat.reply(completion({"content": "hi"}))
    verbose = subprocess.run([*run, "-v"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    for proc in (quiet, verbose):
        assert proc.returncode == 0, proc.stderr
        assert "[model] turn 1" in proc.stderr and "[completed]" in proc.stderr
    assert "HTTP Request: POST" in verbose.stderr  # httpx's INFO line, shown with -v
    assert "HTTP Request" not in quiet.stderr and "httpx" not in quiet.stderr and "temporalio" not in quiet.stderr
