"""What one trace per task costs a task's history: the same tool loop with tracing off (the
baseline) and on, in one run on a fresh embedded dev server.

    python bench/trace_cost.py [STEPS]        (default: 20)

With tracing on, the workflow names its run's ``invoke_agent`` span in the ``noeta-trace`` header
of every activity it schedules (noeta.telemetry.agent_span): that header is all tracing adds to
history (no event, no command). Prints history events and bytes for both, the bytes per scheduled
activity, and the spans the task produced (collected in memory). Sizes, not timings.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker

sys.path.insert(0, str(Path(__file__).parent))
from embedded import embedded_server, host_at  # noqa: E402
from history_growth import fetch_page, responder_for  # noqa: E402 (the same tool loop)


async def run(client: AsyncClient, registry: Registry, steps: int) -> dict[str, int]:
    registry.providers = {"bench": FakeLLMProvider(responder=responder_for(steps))}
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    async with build_worker(client.temporal, registry, queue):
        options = Options(provider="bench", allowed_tools=[fetch_page], max_turns=steps + 1)
        task_id = await client.start("read pages", options, task_queue=queue)
        await client.result(task_id)
    events = await client.history(task_id)
    scheduled = sum(1 for e in events if e.HasField("activity_task_scheduled_event_attributes"))
    return {"events": len(events), "bytes": sum(e.ByteSize() for e in events), "activities": scheduled}


async def main(steps: int) -> None:
    with embedded_server() as (address, home):
        host = host_at(address, home)
        client = await AsyncClient.connect(host)
        registry = Registry.of(tools=[fetch_page], content_store=host.store())
        off = await run(client, registry, steps)
        spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        trace.set_tracer_provider(provider)  # tracing on from here (an SDK provider is installed)
        traced = await AsyncClient.connect(host)  # decided as a client connects, as temporalio's
        on = await run(traced, registry, steps)
        names = sorted({s.name.split(" ")[0] for s in spans.get_finished_spans()})
        counts = {n: sum(1 for s in spans.get_finished_spans() if s.name.startswith(n + " ")) for n in names}
        print(f"# {steps} steps · {time.strftime('%Y-%m-%d')}")
        print("| tracing | history events | history bytes | activities scheduled | spans |")
        print("|---|---:|---:|---:|---|")
        print(f"| off (baseline) | {off['events']} | {off['bytes']:,} | {off['activities']} | none |")
        print(f"| on | {on['events']} | {on['bytes']:,} | {on['activities']} | {', '.join(f'{n} ×{c}' for n, c in counts.items())} |")
        extra = on["bytes"] - off["bytes"]
        print(f"\nadded by tracing: {extra:,} B ({extra / max(on['activities'], 1):.0f} B per scheduled activity, "
              f"{100 * extra / off['bytes']:.1f} % of the history)")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if sys.argv[1:] else 20))
