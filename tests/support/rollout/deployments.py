"""Temporal's own rollout commands (``temporal worker deployment ...``), as an operator runs them."""

from __future__ import annotations

import subprocess
import time

from noeta.client.embedded import temporal_binary


def deployment_command(address: str, *args: str) -> str:
    """Run ``temporal worker deployment ARGS`` against ``address``; its output (raises on failure)."""
    done = subprocess.run(
        [temporal_binary(), "worker", "deployment", *args, "--address", address],
        capture_output=True, text=True, timeout=60,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr or done.stdout)
    return done.stdout


def set_current(address: str, deployment: str, build: str) -> None:
    """Make ``build`` the current version (retried while its workers have not polled yet)."""
    for attempt in range(60):
        try:
            deployment_command(address, "set-current-version", "--deployment-name", deployment, "--build-id", build, "--yes")
            return
        except RuntimeError:
            if attempt == 59:
                raise
            time.sleep(0.5)


def set_ramping(address: str, deployment: str, build: str, percentage: float) -> None:
    """Send ``percentage`` % of new tasks to ``build``."""
    deployment_command(address, "set-ramping-version", "--deployment-name", deployment, "--build-id", build,
                       "--percentage", str(percentage), "--yes")


def stop_ramping(address: str, deployment: str, build: str) -> None:
    """``build`` ramps no more: new tasks go to the current version."""
    deployment_command(address, "set-ramping-version", "--deployment-name", deployment, "--build-id", build,
                       "--delete", "--yes")
