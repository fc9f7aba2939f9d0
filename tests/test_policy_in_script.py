"""A Policy class defined in the script that calls ``query()`` runs (its worker runs in that
process); one a worker elsewhere could not import is refused before any task starts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import ConfigurationError
from noeta.protocols.decisions import CallModel, Finish
from noeta.protocols.policy import serve_in_process
from noeta.protocols.step_context import StepContext
from noeta.protocols.view import View
from tests.support.processes import ROOT

#: A script whose policy lives in ``__main__``: it asks the model once, then answers in its own words.
SCRIPT = textwrap.dedent("""
    from dataclasses import dataclass
    from noeta.sdk import CallModel, Finish, LLMResponse, Options, TextBlock, query
    from noeta.sdk.testing import FakeLLMProvider

    @dataclass(frozen=True)
    class ShoutingPolicy:
        suffix: str = "!"

        def decide(self, ctx, view):
            replies = [m.text for m in view.transcript if m.role == "assistant"]
            if not replies:
                return CallModel()
            return Finish(answer=replies[-1].upper() + self.suffix)

    provider = FakeLLMProvider(responses=[LLMResponse(stop_reason="end_turn", content=[TextBlock("hello")])])
    result = query(Options(policy=ShoutingPolicy(suffix="!!")), goal="Greet me.", provider=provider)
    print(result.status, result.answer())
""")


def test_a_policy_defined_in_the_script_runs_with_query(temporal_server, tmp_path: Path):
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.address, "NOETA_HOME": str(tmp_path / "home"),
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "completed HELLO!!"


async def test_a_policy_no_worker_can_import_is_refused_before_the_start(client: AsyncClient, task_queue: str):
    @dataclass(frozen=True)
    class LocalPolicy:  # inside a function: no worker can import it by path
        def decide(self, ctx: StepContext, view: View) -> CallModel | Finish:
            return Finish(answer="never")

    with pytest.raises(ConfigurationError, match="not importable by a worker.*query\\(\\)"):
        await client.start("Do it.", Options(policy=LocalPolicy()), task_id="refused-local-policy",
                           task_queue=task_queue)
    assert [t for t in await client.list_tasks(limit=50) if t.task_id == "refused-local-policy"] == []


def test_one_path_serves_one_class():
    @dataclass(frozen=True)
    class Twin:
        def decide(self, ctx: StepContext, view: View) -> Finish:
            return Finish(answer="a")

    first = Twin
    serve_in_process(first)
    serve_in_process(first)  # the same class again: nothing changes

    @dataclass(frozen=True)  # type: ignore[no-redef]
    class Twin:  # same module and qualified name, another class
        def decide(self, ctx: StepContext, view: View) -> Finish:
            return Finish(answer="b")

    with pytest.raises(ValueError, match="already served"):
        serve_in_process(Twin)
