"""JSON logs from every process: ``noeta serve`` and ``noeta codec-server`` run for real as
subprocesses with ``NOETA_LOG_FORMAT=json``; every line they write, uvicorn's own included, parses
as JSON."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import httpx
import pytest

from noeta.client.config import Settings
from noeta.security.keys import new_key_entry
from tests.support.processes import ROOT, free_port
from tests.support.waiting import eventually

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def started(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "noeta.cli", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def stopped(proc: subprocess.Popen[str]) -> list[str]:
    """Every line the process wrote (stdout and stderr) once SIGTERM stopped it."""
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    return [line for line in (out + err).splitlines() if line.strip()]


async def up(url: str) -> bool:
    try:
        async with httpx.AsyncClient() as http:
            return (await http.get(url)).status_code < 500
    except httpx.TransportError:
        return False


async def test_every_line_noeta_serve_writes_with_json_logs_is_json(settings: Settings, data_dir):
    port = free_port()
    env = {
        **os.environ, "PYTHONPATH": str(ROOT), "TEMPORAL_ADDRESS": settings.temporal_address, "NOETA_HOME": str(data_dir),
        "NOETA_LOG_FORMAT": "json",
    }
    proc = started(["serve", "--host", "127.0.0.1", "--port", str(port)], env)
    try:
        base = f"http://127.0.0.1:{port}"
        await eventually(lambda: up(f"{base}/healthz"), timeout=60)
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            assert (await http.get("/readyz")).status_code == 200
            assert (await http.get("/tasks/no-such-task", headers={"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"})).status_code == 404
            assert (await http.post("/tasks", json={"goal": ""})).status_code == 422
            assert (await http.get("/")).status_code == 200
    finally:
        lines = stopped(proc)
    entries = []
    for line in lines:
        try:
            entries.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not JSON: {line!r}\nall lines:\n" + "\n".join(lines)) from None
    loggers = {e["logger"] for e in entries}
    assert {"noeta.cli", "uvicorn.error", "uvicorn.access"} <= loggers, loggers  # the banner, uvicorn's own lines
    access = [e["message"] for e in entries if e["logger"] == "uvicorn.access"]
    assert any("GET /readyz" in m and "200" in m for m in access), access
    assert all({"time", "level", "logger", "message"} <= set(e) for e in entries)


@pytest.mark.server
async def test_every_line_the_codec_server_writes_with_json_logs_is_json(tmp_path):
    port = free_port()
    key = new_key_entry("k1")
    env = {
        **os.environ, "PYTHONPATH": str(ROOT), "NOETA_HOME": str(tmp_path), "NOETA_LOG_FORMAT": "json",
        "NOETA_ENCRYPTION_KEYS": key, "NOETA_CODEC_TOKENS": "secret-token-of-the-ui-0123456789",
    }
    proc = started(["codec-server", "--host", "127.0.0.1", "--port", str(port)], env)
    try:
        base = f"http://127.0.0.1:{port}"
        await eventually(lambda: up(f"{base}/healthz"), timeout=60)
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            assert (await http.post("/decode", json={"payloads": []})).status_code == 401
    finally:
        lines = stopped(proc)
    entries = [json.loads(line) for line in lines]  # fails on the first line that is not JSON
    assert {"noeta.cli", "uvicorn.access"} <= {e["logger"] for e in entries}
    assert "secret-token-of-the-ui" not in "\n".join(lines)


async def test_every_line_a_worker_writes_with_json_logs_is_json(settings: Settings, data_dir, task_queue: str):
    health = free_port()
    env = {
        **os.environ, "PYTHONPATH": str(ROOT), "TEMPORAL_ADDRESS": settings.temporal_address, "NOETA_HOME": str(data_dir),
        "NOETA_LOG_FORMAT": "json", "NOETA_HEALTH_PORT": str(health),
    }
    proc = started(["worker", "--registry", "tests.support.registry:cli_registry", "--task-queue", task_queue], env)
    try:
        await eventually(lambda: up(f"http://127.0.0.1:{health}/readyz"), timeout=60)
    finally:
        lines = stopped(proc)
    entries = [json.loads(line) for line in lines]  # fails on the first line that is not JSON
    messages = [e["message"] for e in entries if e["logger"] == "noeta.cli"]
    assert any(m.startswith("noeta worker on") for m in messages) and "stopped" in messages, messages


@pytest.mark.server
def test_a_command_that_fails_at_start_with_json_logs_says_why_in_json(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NOETA_HOME": str(tmp_path), "NOETA_LOG_FORMAT": "json",
           "NOETA_ENCRYPTION_KEYS": "", "NOETA_CODEC": ""}
    proc = started(["codec-server", "--port", str(free_port())], env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    entries = [json.loads(line) for line in (out + err).splitlines() if line.strip()]
    assert entries[-1]["level"] == "ERROR" and "ConfigurationError" in entries[-1]["message"]
