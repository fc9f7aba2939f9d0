"""``python -m tests.support.sandbox_imports ADDRESS QUEUE``: run one task whose workflow runs in a
strict sandbox that warns for every module it imports itself, and print those modules as JSON.

A process of its own: the sandbox's import hook also sees what other threads of a process import
while a workflow activation runs (a Redis client's or a metrics exporter's first lazy imports, in a
test process that runs other tests beside it), which would be counted as the workflow's.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
import warnings
from pathlib import Path

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.workflow import SandboxImportNotificationPolicy

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.options import HostConfig, Options
from noeta.context.content_store import LocalContentStore
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.support.pure_policy import WrappedLLMPolicy
from tests.support.scripts import call, say
from tests.support.tools import add


async def imported_in_sandbox(address: str, queue: str) -> tuple[str, list[str]]:
    """(the task's answer, the modules the sandbox imported for its workflow)."""
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_import_notification_policy(
            SandboxImportNotificationPolicy.WARN_ON_UNINTENTIONAL_PASSTHROUGH
        )
    )
    provider = FakeLLMProvider(responses=[call(("c1", "add", {"a": 1, "b": 2})), say("3")])
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalContentStore(Path(tmp) / "content")
        client = await AsyncClient.connect(HostConfig(settings=Settings(temporal_address=address, home=Path(tmp)), content_store=store))
        registry = Registry.of(tools=[add], providers=[provider], content_store=store)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            async with build_worker(client.temporal, registry, queue, workflow_runner=runner):
                # A policy of its own (user code around the built-in one) puts the task in the sandbox.
                options = Options(provider=provider, allowed_tools=[add], policy=WrappedLLMPolicy())
                result = await client.result(await client.start("1+2", options, task_queue=queue))
    modules = sorted({
        m.group(1) for w in caught if (m := re.match(r"Module (\S+) was not intentionally passed through", str(w.message)))
    })
    return result.answer, modules


if __name__ == "__main__":
    answer, modules = asyncio.run(imported_in_sandbox(sys.argv[1], sys.argv[2]))
    print(json.dumps({"answer": answer, "modules": modules}))
