"""The noisy-neighbour scenario, shared by tests/test_fairness.py and bench/noisy_neighbour.py: one
worker with a few slots, batches of tasks started one batch after the other (a tenant, a count, a
priority each), every task a few scripted model turns around a tool that works for a moment; the
order in which they complete."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.config.tuning import WorkerTuning
from noeta.context.content_store import ContentStore
from noeta.protocols.messages import LLMRequest, LLMResponse, ToolResultBlock
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.worker import Registry, build_worker
from tests.support.scripts import call, say


@tool(name="work", version="1", input_schema={"type": "object"}, description="Works for a moment.")
async def work(arguments: dict, ctx: ToolContext) -> ToolResult:
    await asyncio.sleep(float(arguments.get("seconds", 0.5)))
    return ToolResult(success=True, output="done")


def scripted(steps: int, seconds: float) -> FakeLLMProvider:
    """A model that calls ``work`` ``steps`` times, one call a turn, then answers."""

    def respond(request: LLMRequest) -> LLMResponse:
        done = sum(isinstance(block, ToolResultBlock) for m in request.messages for block in m.content)
        return call((f"w{done}", "work", {"seconds": seconds})) if done < steps else say("done")

    return FakeLLMProvider(responder=respond)


@dataclass(frozen=True)
class Batch:
    """``count`` tasks of ``tenant`` at ``priority`` (None: the default), labelled ``label``."""

    label: str
    tenant: str
    count: int
    priority: int | None = None


@dataclass(frozen=True)
class Outcome:
    """The labels of the tasks in the order they completed, and how long the run took."""

    order: list[str]
    seconds: float

    def before_last(self, label: str, other: str) -> int:
        """How many ``other`` tasks completed before the last ``label`` task."""
        last = max(i for i, each in enumerate(self.order) if each == label)
        return self.order[:last].count(other)


async def run_batches(
    client: AsyncClient,
    store: ContentStore,
    queue: str,
    batches: Sequence[Batch],
    *,
    steps: int = 2,
    seconds: float = 0.5,
    slots: int = 3,
    on_queued: Callable[[], Awaitable[None]] | None = None,
) -> Outcome:
    """Start ``batches`` in order on ``queue`` and serve them with one worker of ``slots`` activity
    slots (and two workflow-task slots): running while they start, or with ``on_queued`` started
    once all are queued and ``on_queued`` has looked at them. Returns the completion order of their
    labels."""
    provider = scripted(steps, seconds)
    registry = Registry.of(tools=[work], providers=[provider], content_store=store)
    tuning = WorkerTuning(max_activities=slots, max_workflow_tasks=2)
    worker = build_worker(client.temporal, registry, queue, tuning=tuning, workflow_failure_exception_types=[Exception])
    order: list[str] = []
    began = time.monotonic()

    async def finish(label: str, task_id: str) -> None:
        result = await client.result(task_id)
        assert result.status == "completed", (task_id, result.status)
        order.append(label)

    async def start_all() -> list[asyncio.Task[None]]:
        waiting = []
        for batch in batches:
            options = Options(provider=provider, allowed_tools=[work], priority=batch.priority, max_turns=steps + 2)
            for _ in range(batch.count):
                task_id = await client.start("work", options, task_queue=queue, tenant=batch.tenant)
                waiting.append(asyncio.ensure_future(finish(batch.label, task_id)))
        return waiting

    if on_queued is None:
        async with worker:
            await asyncio.gather(*await start_all())
    else:
        waiting = await start_all()
        await on_queued()
        async with worker:
            await asyncio.gather(*waiting)
    return Outcome(order=order, seconds=time.monotonic() - began)


__all__ = ["Batch", "Outcome", "run_batches", "scripted", "work"]
