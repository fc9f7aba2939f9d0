"""The operator's commands as processes: `noeta worker --metrics-port` with JSON logs, and
`noeta codec-server`, each spoken to over real HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.security.codec import EncryptionCodec
from noeta.security.keys import new_key_entry, parse_keys
from tests.support.waiting import eventually
from tests.test_telemetry import free_port, sample

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "operator-token-" + "c3" * 12


def start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "noeta.cli", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.send_signal(signal.SIGTERM)
    try:
        return process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.communicate()


async def up(url: str, process: subprocess.Popen[str]) -> None:
    async def answering() -> bool:
        assert process.poll() is None, process.communicate()
        try:
            async with httpx.AsyncClient() as http:
                await http.get(url)
            return True
        except httpx.TransportError:
            return False

    await eventually(answering, timeout=60, interval=0.2)


async def test_worker_metrics_port_and_json_logs(client: AsyncClient, settings, data_dir: Path, task_queue: str):
    port = free_port()
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": settings.temporal_address,
        "NOETA_HOME": str(data_dir),
        "PYTHONPATH": str(ROOT),
        "NOETA_LOG_FORMAT": "json",
    }
    worker = start(env, "worker", "--registry", "tests.support.registry:cli_registry", "--task-queue", task_queue, "--metrics-port", str(port))
    try:
        await up(f"http://127.0.0.1:{port}/metrics", worker)
        task_id = await client.start("what is 20 + 22?", Options(provider="default", allowed_tools=["add"]), task_queue=task_queue)
        assert (await client.result(task_id)).answer == "the answer is 42"
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    finally:
        _, stderr = stop(worker)
    assert sample(text, "noeta_model_tokens_total", kind="output", task_queue=task_queue) == 8
    assert sample(text, "noeta_tool_calls_total", tool="add", outcome="ok", task_queue=task_queue) == 1
    assert sample(text, "temporal_worker_task_slots_available", task_queue=task_queue) >= 0
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert lines, stderr
    assert all({"time", "level", "logger", "message"} <= set(entry) for entry in lines)
    assert "Traceback" not in stderr


@pytest.mark.server
async def test_codec_server_command(tmp_path: Path):
    keys = new_key_entry("ops1")
    port = free_port()
    ui = "http://localhost:8233"
    env = {**os.environ, "NOETA_ENCRYPTION_KEYS": keys, "NOETA_CODEC_TOKENS": TOKEN, "NOETA_HOME": str(tmp_path)}
    server = start(env, "codec-server", "--port", str(port), "--ui-origin", ui)
    ring = parse_keys([keys])
    assert ring is not None
    [sealed] = await EncryptionCodec(ring).encode([Payload(metadata={"encoding": b"json/plain"}, data=b'"the goal"')])
    body = json_format.MessageToJson(Payloads(payloads=[sealed]))
    try:
        await up(f"http://127.0.0.1:{port}/healthz", server)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            headers = {"content-type": "application/json", "origin": ui}
            assert (await http.post("/decode", content=body, headers=headers)).status_code == 401
            decoded = await http.post("/decode", content=body, headers={**headers, "authorization": f"Bearer {TOKEN}"})
    finally:
        stop(server)
    assert decoded.status_code == 200 and decoded.headers["access-control-allow-origin"] == ui
    assert json_format.Parse(decoded.content, Payloads()).payloads[0].data == b'"the goal"'


@pytest.mark.server
def test_codec_server_needs_keys(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOETA_")}
    result = subprocess.run(
        [sys.executable, "-m", "noeta.cli", "codec-server", "--port", str(free_port())],
        cwd=ROOT, env={**env, "NOETA_HOME": str(tmp_path)}, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "ConfigurationError" in result.stderr and "NOETA_ENCRYPTION_KEYS" in result.stderr
