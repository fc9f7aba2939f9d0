"""noeta.workflows is pure: it runs in the strict Temporal sandbox and imports no I/O library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError

from noeta.client.client import AsyncClient
from noeta.client.options import Options, build_task_input
from noeta.protocols.names import BUILTIN_POLICY_WORKFLOW_NAME, WORKFLOW_NAME
from noeta.sdk.testing import FakeLLMProvider
from tests.support.pure_policy import WrappedLLMPolicy
from tests.support.scripts import say
from tests.support.waiting import eventually

IO_MODULES = ["httpx", "httpcore", "jsonschema", "asyncpg", "psycopg", "redis", "anthropic", "openai", "mcp",
              "noeta.activities", "noeta.providers", "noeta.client", "noeta.context.content_store"]


@pytest.mark.server
def test_workflow_package_imports_no_io_modules():
    code = (
        "import json, sys, noeta.workflows; "
        f"print(json.dumps([m for m in {IO_MODULES!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


#: What AgentWorkflow may import inside the sandbox beyond the SDK's pass-through defaults.
PURE_PREFIXES = ("tests.support.pure_policy", "noeta.errors", "noeta.protocols", "noeta.builtins", "noeta.workflows", "noeta.temporal.search_attributes")


@pytest.mark.server
def test_agent_workflow_imports_only_pure_modules_in_the_sandbox(settings, task_queue):
    # The sandbox warns once for every module it imports itself (not passed through from the host):
    # that list is exactly what the workflow code pulls in, and it must hold no I/O module. In a
    # process of its own (tests.support.sandbox_imports says why).
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.sandbox_imports", settings.temporal_address, task_queue],
        cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["answer"] == "3"
    imported = set(found["modules"])
    assert "noeta.protocols.messages" in imported  # the notification works at all
    assert {m for m in imported if m != "noeta" and not m.startswith(PURE_PREFIXES)} == set()


async def test_user_policies_run_in_the_sandbox_and_the_builtin_policy_outside(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responder=lambda request: say("done"))
    async with serve(providers=[provider]):
        builtin = await client.start("plain", Options(provider=provider), task_queue=task_queue)
        custom = await client.start("own policy", Options(provider=provider, policy=WrappedLLMPolicy()), task_queue=task_queue)
        for task_id in (builtin, custom):
            assert (await client.result(task_id)).answer == "done"
    kinds = {t: (await client.temporal.get_workflow_handle(t).describe()).workflow_type for t in (builtin, custom)}
    assert kinds == {builtin: BUILTIN_POLICY_WORKFLOW_NAME, custom: WORKFLOW_NAME}

    async def both_listed() -> bool:  # visibility lists both kinds (it lags a moment)
        return {builtin, custom} <= {t.task_id for t in await client.list_tasks(limit=1000)}

    await eventually(both_listed)


async def test_the_unsandboxed_type_refuses_a_user_policy(client: AsyncClient, serve, task_queue):
    # Started by hand (not through Noeta's client) with a policy: refused, typed, before any step.
    options = Options(policy=WrappedLLMPolicy())
    async with serve(providers=[FakeLLMProvider(responses=[])]):
        task = build_task_input(options, "sneak in", provider_name="FakeLLMProvider", task_id="refused-user-policy")
        handle = await client.temporal.start_workflow(
            BUILTIN_POLICY_WORKFLOW_NAME, task, id="refused-user-policy", task_queue=task_queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    assert failed.value.cause.type == "ConfigurationError"
    assert "run as AgentWorkflow (in the sandbox)" in str(failed.value.cause)
    events = [e async for e in handle.fetch_history_events()]
    assert not any(e.HasField("activity_task_scheduled_event_attributes") for e in events)
