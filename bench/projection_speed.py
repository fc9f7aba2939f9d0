"""How long project() takes on a large history (pure CPU; the history is fetched first).

    python bench/projection_speed.py [STEPS]        (default 850 tool steps ≈ 10,000+ events)

Records a real task on a fresh embedded dev server (each step: one model call asking for one
tool), fetches every run's history (continue-as-new splits it past ~4,096 events), then times
project() over all of it five times and prints events, envelopes and the min / median time.
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import sys
import time
import uuid

from noeta.client.client import AsyncClient
from noeta.client.events import history_events
from noeta.client.options import Options
from noeta.client.projection import project
from noeta.protocols.messages import (
    LLMResponse,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from noeta.protocols.tool import ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.worker import Registry, build_worker

from embedded import embedded_server, host_at  # bench/, beside this script


@tool(name="lookup", version="1", input_schema={"type": "object"}, description="Return a short record.")
def lookup(arguments, ctx):
    return ToolResult(success=True, output=f"record {arguments.get('n')}: status=open owner=ops")


def responder_for(steps: int):
    def respond(request):
        done = sum(1 for m in request.messages for b in m.content if isinstance(b, ToolResultBlock))
        if done < steps:
            return LLMResponse(
                stop_reason="tool_use",
                content=[TextBlock(text=f"checking {done}"), ToolUseBlock(call_id=f"c{done}", tool_name="lookup", arguments={"n": done})],
                usage=Usage(uncached=50, output=12),
            )
        return LLMResponse(stop_reason="end_turn", content=[TextBlock(text="all checked")], usage=Usage(output=3))

    return respond


async def main(steps: int) -> None:
    with embedded_server() as (address, home):
        host = host_at(address, home)
        client = await AsyncClient.connect(host)
        registry = Registry.of(tools=[lookup], providers={"bench": FakeLLMProvider(responder=responder_for(steps))},
                               content_store=host.store())
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        async with build_worker(client.temporal, registry, queue):
            task_id = await client.start("check everything", Options(provider="bench", allowed_tools=[lookup],
                                                                     max_turns=steps + 1), task_queue=queue)
            await client.result(task_id)
        runs: list[list] = []
        async for run, event in history_events(client.temporal, task_id):
            if run == len(runs):
                runs.append([])
            runs[run].append(event)
        total = sum(len(r) for r in runs)
        timings = []
        for _ in range(5):
            started = time.perf_counter()
            envelopes = project(runs, task_id=task_id)
            timings.append(time.perf_counter() - started)
        print(f"# {platform.node()} · {platform.machine()} · Python {platform.python_version()} · {time.strftime('%Y-%m-%d')}")
        print(f"steps {steps} · runs {len(runs)} · history events {total:,} · envelopes {len(envelopes):,}")
        print(f"project(): min {min(timings):.3f} s · median {statistics.median(timings):.3f} s "
              f"· {total / min(timings):,.0f} events/s")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 850))
