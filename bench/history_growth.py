"""History size per step: Noeta's reference-passing vs passing the whole transcript each call.

    python bench/history_growth.py [STEPS ...]        (default: 10 30 100)

Runs a tool loop on a fresh embedded dev server: each step the model asks for one tool whose
output is 5 KiB. Prints, per run length K, the history's bytes and events, the bytes added by the
last step, and what a design that puts the whole transcript into every model activity's input
would have recorded for the same conversation (computed from the very requests the provider saw).
Figures are sizes, not timings, so they are stable across machines; wall time is informational.
"""

from __future__ import annotations

import asyncio
import platform
import sys
import time
import uuid

from pydantic import TypeAdapter

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.protocols.messages import (
    LLMResponse,
    Message,
    TextBlock,
    ToolUseBlock,
    Usage,
)
from noeta.protocols.tool import ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.worker import Registry, build_worker

from embedded import embedded_server, host_at  # bench/, beside this script

OUTPUT = ("x" * 63 + "\n") * 80  # 5 KiB
TRANSCRIPT = TypeAdapter(list[Message])


@tool(name="fetch_page", version="1", input_schema={"type": "object"}, description="Return 5 KiB of text.")
def fetch_page(arguments, ctx):
    return ToolResult(success=True, output=OUTPUT)


def responder_for(steps: int):
    def respond(request):
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn < steps:
            return LLMResponse(
                stop_reason="tool_use",
                content=[ToolUseBlock(call_id=f"c{turn}", tool_name="fetch_page", arguments={"page": turn})],
                usage=Usage(uncached=100, output=10),
            )
        return LLMResponse(stop_reason="end_turn", content=[TextBlock(text="done")], usage=Usage(output=1))

    return respond


async def run(client: AsyncClient, registry: Registry, steps: int) -> dict[str, float]:
    provider = FakeLLMProvider(responder=responder_for(steps))
    registry.providers = {"bench": provider}
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    async with build_worker(client.temporal, registry, queue):
        task_id = await client.start(
            "read pages", Options(provider="bench", allowed_tools=[fetch_page], max_turns=steps + 1),
            task_queue=queue,
        )
        await client.result(task_id)
    wall = time.perf_counter() - started
    events = await client.history(task_id)
    sizes = [e.ByteSize() for e in events]
    model_calls = [e for e in events if e.HasField("activity_task_scheduled_event_attributes")
                   and e.activity_task_scheduled_event_attributes.activity_type.name == "noeta.call_model"]
    last_step = sum(sizes[model_calls[-2].event_id - 1 : model_calls[-1].event_id - 1])
    naive = sum(len(TRANSCRIPT.dump_json(r.messages)) for r in provider.received_requests)
    return {
        "steps": steps, "events": len(events), "history_bytes": sum(sizes), "last_step_bytes": last_step,
        "naive_transcript_bytes": naive, "wall_s": wall,
    }


async def main(step_counts: list[int]) -> None:
    with embedded_server() as (address, home):
        host = host_at(address, home)
        client = await AsyncClient.connect(host)
        registry = Registry.of(tools=[fetch_page], content_store=host.store())
        print(f"# {platform.node()} · {platform.processor() or platform.machine()} · Python {platform.python_version()} · {time.strftime('%Y-%m-%d')}")
        print("| steps K | history events | history bytes | bytes added by step K | model-call inputs if each carried the whole transcript | wall s |")
        print("|---:|---:|---:|---:|---:|---:|")
        for steps in step_counts:
            r = await run(client, registry, steps)
            print(f"| {r['steps']} | {r['events']} | {r['history_bytes']:,} | {r['last_step_bytes']:,} | "
                  f"{r['naive_transcript_bytes']:,} | {r['wall_s']:.1f} |", flush=True)


if __name__ == "__main__":
    asyncio.run(main([int(a) for a in sys.argv[1:]] or [10, 30, 100]))
