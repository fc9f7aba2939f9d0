"""Record the histories of tasks whose remote MCP server asks back during a tool call, for the
replay tests:

    python -m tests.histories.record_mcp [SCENARIO ...]

Writes tests/histories/mcp-elicitation/{accepted,declined}.json (a person's answer to the server's
question: accept with content, decline) and tests/histories/mcp-sampling/sampled.json (the task's
model answers the server's sampling request). As for record.py: only to ADD histories, never to
re-record one that fails to replay; name the scenarios to record (default: all).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.worker import Registry, build_worker
from tests.histories.record import run_histories
from tests.histories.recording import recording_client
from tests.support.mcp_asking_registry import registry as asking_registry
from tests.support.mcp_sampling_registry import registry as sampling_registry
from tests.support.mcp_server import running_http_server
from tests.test_mcp_elicitation import options, waiting_question

HERE = Path(__file__).parent


async def accepted(client: AsyncClient, url: str) -> str:
    task_id = await client.start("go", options(url))
    question = await waiting_question(client, task_id)
    await client.approve(task_id, question.call_id, True, approver="user:ada", arguments={"confirm": True})
    await client.result(task_id)
    return task_id


async def declined(client: AsyncClient, url: str) -> str:
    task_id = await client.start("go", options(url))
    question = await waiting_question(client, task_id)
    await client.approve(task_id, question.call_id, False, approver="user:ada", reason="not now")
    await client.result(task_id)
    return task_id


async def sampled(client: AsyncClient, url: str) -> str:
    task_id = await client.start("go", Options(provider="sampling", mcp_servers={"sampler": {"type": "http", "url": url, "sampling": True}}))
    await client.result(task_id)
    return task_id


SCENARIOS: dict[str, tuple[str, Registry, Callable[[AsyncClient, str], Awaitable[str]]]] = {
    "accepted": ("mcp-elicitation", asking_registry, accepted),
    "declined": ("mcp-elicitation", asking_registry, declined),
    "sampled": ("mcp-sampling", sampling_registry, sampled),
}


async def main(names: list[str]) -> None:
    # The test MCP server listens on loopback, which a worker refuses unless it is listed.
    os.environ.setdefault("NOETA_MCP_URLS", "http://127.0.0.1:*")
    async with recording_client() as (server, client, store):
        with running_http_server(asking=True) as url:
            for name in names:
                folder, registry, scenario = SCENARIOS[name]
                registry.content_store = store
                async with build_worker(client.temporal, registry, client.task_queue):
                    task_id = await scenario(client, url)
                (history,) = await run_histories(client, task_id)
                (HERE / folder).mkdir(exist_ok=True)
                (HERE / folder / f"{name}.json").write_text(history.to_json())
                print(f"recorded {folder}/{name}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:] or list(SCENARIOS)))
