"""``noeta run``'s output on a timeout: the progress line from the event log says what happened, and
no raw temporalio WARNING line (its message with a Python dict of activity details) is printed
among them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from noeta.protocols.messages import LLMRequest, LLMResponse, ToolResultBlock
from noeta.protocols.tool import ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.worker import Registry
from tests.support.processes import ROOT
from tests.support.scripts import call, say


@tool(name="stuck", version="1", timeout_seconds=1, max_retries=1,
      input_schema={"type": "object", "properties": {}})
def stuck(arguments, ctx):
    time.sleep(3)  # past its one-second timeout, on each attempt
    return ToolResult(success=True, output="late")


def respond(request: LLMRequest) -> LLMResponse:
    results = [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]
    return say("the tool timed out") if results else call(("c1", "stuck", {}))


#: For `noeta run --registry tests.test_run_output:registry`.
registry = Registry.of(tools=[stuck], providers={"default": FakeLLMProvider(responder=respond)})


@pytest.mark.server
def test_a_timed_out_tool_prints_progress_lines_not_temporalio_warnings(settings, data_dir: Path):
    env = {k: v for k, v in os.environ.items() if k != "NOETA_LOG_FORMAT"}
    env.update(TEMPORAL_ADDRESS=settings.temporal_address, NOETA_HOME=str(data_dir), PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "noeta", "run", "use the stuck tool", "--registry", "tests.test_run_output:registry",
         "--no-stream"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "the tool timed out\n"
    lines = proc.stderr.splitlines()
    assert any(re.fullmatch(r"\[tool\]  stuck ✗ failed: .*did not finish within 1 s.*", line) for line in lines), proc.stderr
    assert not [line for line in lines if "temporalio" in line or "{'" in line or "Traceback" in line], proc.stderr
