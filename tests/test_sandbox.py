"""noeta.workflows is pure: it runs in the strict Temporal sandbox and imports no I/O library."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings

from temporalio.worker.workflow_sandbox import (
    SandboxedWorkflowRunner,
    SandboxRestrictions,
)
from temporalio.workflow import SandboxImportNotificationPolicy

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.support.scripts import call, say
from tests.support.tools import add

IO_MODULES = ["httpx", "httpcore", "jsonschema", "asyncpg", "psycopg", "redis", "anthropic", "openai", "mcp",
              "noeta.activities", "noeta.providers", "noeta.client", "noeta.context.content_store"]


def test_workflow_package_imports_no_io_modules():
    code = (
        "import json, sys, noeta.workflows; "
        f"print(json.dumps([m for m in {IO_MODULES!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


#: What AgentWorkflow may import inside the sandbox beyond the SDK's pass-through defaults.
PURE_PREFIXES = ("noeta.errors", "noeta.protocols", "noeta.builtins", "noeta.workflows", "noeta.search_attributes")


async def test_agent_workflow_imports_only_pure_modules_in_the_sandbox(client: AsyncClient, content_store, task_queue):
    # The sandbox warns once for every module it imports itself (not passed through from the host):
    # that list is exactly what the workflow code pulls in, and it must hold no I/O module.
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_import_notification_policy(
            SandboxImportNotificationPolicy.WARN_ON_UNINTENTIONAL_PASSTHROUGH
        )
    )
    provider = FakeLLMProvider(responses=[call(("c1", "add", {"a": 1, "b": 2})), say("3")])
    registry = Registry.of(tools=[add], providers=[provider], content_store=content_store)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with build_worker(client.temporal, registry, task_queue, workflow_runner=runner):
            task_id = await client.start("1+2", Options(provider=provider, allowed_tools=[add]), task_queue=task_queue)
            result = await client.result(task_id)
    assert (result.status, result.answer) == ("completed", "3")
    imported = {
        m.group(1)
        for w in caught
        if (m := re.match(r"Module (\S+) was not intentionally passed through", str(w.message)))
    }
    assert "noeta.protocols.messages" in imported  # the notification works at all
    assert {m for m in imported if m != "noeta" and not m.startswith(PURE_PREFIXES)} == set()
