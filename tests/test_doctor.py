"""`noeta doctor` against the test server, an unreachable one, and an environment with providers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from noeta.client.embedded import free_port

ROOT = Path(__file__).resolve().parents[1]
PROVIDER_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "NOETA_MODEL")


def doctor(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "noeta.cli", "doctor"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def lines_by_name(out: str) -> dict[str, str]:
    """'ok temporal   detail' -> {'temporal': 'ok temporal   detail'}"""
    return {line[3:23].strip(): line for line in out.splitlines()}


def base_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS and k != "NOETA_CONTENT_STORE"}
    return {**env, "NOETA_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}


def test_doctor_reports_a_reachable_server_its_search_attributes_and_the_providers(settings, tmp_path: Path):
    env = base_env(tmp_path) | {
        "TEMPORAL_ADDRESS": settings.temporal_address,
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "ANTHROPIC_API_KEY": "sk-ant-doctor-secret",
    }
    result = doctor(env)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = lines_by_name(result.stdout)
    assert checks["temporal"] == f"ok temporal             {settings.temporal_address} (TEMPORAL_ADDRESS), namespace 'default', reachable"
    assert checks["search attributes"] == "ok search attributes    registered"
    assert checks["content store"] == f"ok content store        LocalContentStore('{tmp_path / 'content'}'), writable"
    assert checks["provider openai"] == "ok provider openai      configured: http://127.0.0.1:9/v1"
    assert checks["provider anthropic"].startswith("ok provider anthropic   configured: https://api.anthropic.com")
    assert checks["default provider"] == "ok default provider     anthropic (what `noeta run` uses)"
    assert "sk-ant-doctor-secret" not in result.stdout  # names, never keys
    assert set(checks) >= {"tool router", "text model", "provider local"}


@pytest.mark.server
def test_doctor_fails_on_an_unreachable_server_and_an_unusable_store(tmp_path: Path):
    port = free_port()  # nothing listens there
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the content store's directory should be")
    env = base_env(tmp_path) | {"TEMPORAL_ADDRESS": f"127.0.0.1:{port}", "NOETA_CONTENT_DIR": str(blocker)}
    result = doctor(env)
    assert result.returncode == 1
    checks = lines_by_name(result.stdout)
    assert checks["temporal"].startswith(f"!! temporal             127.0.0.1:{port} (TEMPORAL_ADDRESS) unreachable: ")
    assert "search attributes" not in checks  # not checkable without a server
    assert checks["content store"].startswith("!! content store        ")


@pytest.mark.server
def test_doctor_on_a_fresh_embedded_home_starts_nothing(tmp_path: Path):
    env = {k: v for k, v in base_env(tmp_path).items() if k != "TEMPORAL_ADDRESS"}
    result = doctor(env)
    checks = lines_by_name(result.stdout)
    assert checks["temporal"].startswith("ok temporal             embedded dev server, not running (starts on first use; ")
    assert not (tmp_path / "temporal").exists()
