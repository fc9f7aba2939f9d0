"""The README's quickstart walkthrough, as written: `noeta run` on the embedded default (its own dev
server, the local model, the built-in tools), killed with SIGKILL while its tool runs; `noeta worker`
with the same NOETA_HOME finishes the task; `noeta result` prints the answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.local_model import LOCAL_MODEL

ROOT = Path(__file__).resolve().parents[1]

pytestmark = LOCAL_MODEL

CONFIGURED = ("TEMPORAL_ADDRESS", "NOETA_TASK_QUEUE", "NOETA_CONTENT_DIR", "NOETA_CONTENT_STORE",
              "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "NOETA_MODEL")


def noeta(*args: str) -> list[str]:
    return [sys.executable, "-m", "noeta.cli", *args]


@pytest.mark.server
@pytest.mark.slow
def test_kill_noeta_run_mid_tool_then_noeta_worker_finishes_the_task(tmp_path: Path):
    home, workspace = tmp_path / "home", tmp_path / "ws"
    workspace.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in CONFIGURED}
    env |= {"NOETA_HOME": str(home), "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen(noeta("run", "Wait for 5 seconds."), cwd=workspace, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    worker = None
    try:
        assert run.stderr is not None
        seen: list[str] = []
        for line in run.stderr:  # live progress: stop at the tool's start
            seen.append(line.rstrip("\n"))
            if line.startswith("[tool]  wait("):
                break
        assert seen[-1] == '[tool]  wait({"seconds": 5.0}) …', seen
        [started] = [line for line in seen if line.startswith("task ")]
        task_id, queue = started.split()[1], started.split("task queue ")[1].rstrip(")")  # a queue of its own
        assert '[model] → calls wait({"seconds": 5.0})' in "\n".join(seen)
        run.send_signal(signal.SIGKILL)
        run.wait(10)

        worker = subprocess.Popen(noeta("worker", "--task-queue", queue), cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        assert worker.stdout is not None
        assert worker.stdout.readline().startswith("noeta worker on embedded server")
        result = subprocess.run(noeta("result", task_id), cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=180)
        assert result.returncode == 0, result.stderr
        assert "waited 5 seconds" in result.stdout

        events = subprocess.run(noeta("events", task_id, "--json"), cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=60)
        envelopes = [json.loads(line) for line in events.stdout.splitlines()]
        kinds = [e["type"] for e in envelopes]
        assert kinds.count("ProviderCallCompleted") == 2  # the decision to wait was not made again
        [done] = [e["payload"] for e in envelopes if e["type"] == "ToolCallCompleted"]
        assert (done["tool_name"], done["success"]) == ("wait", True) and done["attempt"] >= 2
        assert kinds[-1] == "TaskCompleted"
    finally:
        run.kill()
        if worker is not None:
            worker.terminate()
            worker.wait(30)
        # The dev server `noeta run` started outlives it (that is the point); stop it here.
        state = home / "temporal" / "server.json"
        if state.exists():
            try:
                os.kill(json.loads(state.read_text())["pid"], signal.SIGTERM)
            except ProcessLookupError:
                pass
