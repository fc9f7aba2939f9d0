"""Real resources for the resource tests (PostgreSQL on 127.0.0.1:5432, Redis on 127.0.0.1:6379),
and a worker that serves whatever a task's Options (and its sub-agents') carry."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from noeta.client.client import AsyncClient
from noeta.client.options import Options, SubAgent
from noeta.protocols.messages import LLMProvider
from noeta.protocols.resources import equip_resource
from noeta.protocols.tool import ToolResult
from noeta.resources.context import expect_resource
from noeta.sdk._query import registry_for
from noeta.sdk.tools import tool
from noeta.worker import Registry, build_worker
from tests.support.postgres import DSN as PG_DSN
from tests.support.postgres import require_postgres

REDIS_URL = os.environ.get("NOETA_TEST_REDIS", "redis://127.0.0.1:6379/0")


def require_redis() -> None:
    """Skip without a Redis server, unless CI's NOETA_REQUIRE_REDIS=1 makes that a failure."""
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except redis.ConnectionError as err:
        if os.environ.get("NOETA_REQUIRE_REDIS") == "1":
            raise
        pytest.skip(f"no Redis at {REDIS_URL}: {err}")


def open_pool() -> ConnectionPool:
    require_postgres()
    pool = ConnectionPool(PG_DSN, min_size=1, max_size=2, open=True)
    pool.wait(timeout=10)
    return pool


def unique(prefix: str) -> str:
    """A name no other test (or engineer's test run) uses: tables, Redis keys."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@asynccontextmanager
async def serving(
    client: AsyncClient, task_queue: str, options: Options, provider: LLMProvider,
    resources: Mapping[str, Any] | None = None,
) -> AsyncIterator[Registry]:
    registry = registry_for(options, client.content_store, resources)
    registry.add_provider(provider)
    async with build_worker(client.temporal, registry, task_queue, workflow_failure_exception_types=[Exception]):
        yield registry


# -- the recorded "resources" history (tests/histories/task-resources/) ------------------------------


def make_label() -> str:
    return "label-1"


LABEL = equip_resource("label", create=make_label, expose=True)


@tool(name="read_label", version="1", input_schema={"type": "object"}, resources=["label"])
def read_label(arguments: dict[str, Any], ctx: Any) -> ToolResult:
    return ToolResult(success=True, output=f"{expect_resource('label')} for tenant {ctx.scope['tenant']}")


def delegate_to_reader(request: Any) -> Any:
    """The root calls the ``reader`` sub-agent; the reader calls ``read_label``; both then answer."""
    from tests.support.scripts import call, say

    answered = [b for m in request.messages for b in m.content if getattr(b, "type", "") == "tool_result"]
    if "/sub/" in request.metadata["task_id"]:
        return say(f"read {answered[0].output}") if answered else call(("l1", "read_label", {}))
    return say(f"reader said: {answered[0].output}") if answered else call(("a1", "reader", {"goal": "read the label"}))


def resources_options() -> Options:
    return Options(
        resources=[LABEL],
        scope={"tenant": "1001"},
        subagents=[SubAgent("reader", "Reads the label.", Options(allowed_tools=[read_label]))],
    )
