"""History grows by a bounded amount per step, whatever the conversation's length (DESIGN §4)."""

from __future__ import annotations

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.sdk.testing import FakeLLMProvider
from tests.support.scripts import call, say
from tests.support.tools import big_output

STEPS = 30


def responder(request):
    turn = sum(1 for m in request.messages if m.role == "assistant")
    return call((f"c{turn}", "big_output", {"kb": 5})) if turn < STEPS else say("done")


async def test_history_bytes_per_step_do_not_grow_with_the_transcript(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responder=responder)
    async with serve(tools=[big_output], providers=[provider]):
        task_id = await client.start(
            "fill the context", Options(provider=provider, allowed_tools=[big_output], max_turns=STEPS + 1),
            task_queue=task_queue,
        )
        result = await client.result(task_id)
    assert result.status == "completed" and result.turns == STEPS + 1

    # The provider saw the whole, growing transcript with every 5 KB body resolved ...
    last = provider.received_requests[-1]
    assert sum(len(b.output) for m in last.messages for b in m.content if getattr(b, "type", "") == "tool_result") == STEPS * 5 * 1024

    # ... while each step added about the same number of bytes to history.
    events = await client.history(task_id)
    step_ends = [e.event_id for e in events if e.HasField("activity_task_scheduled_event_attributes")
                 and e.activity_task_scheduled_event_attributes.activity_type.name == "noeta.call_model"]
    sizes = {e.event_id: e.ByteSize() for e in events}
    per_step = [sum(sizes[i] for i in range(a, b)) for a, b in zip(step_ends, step_ends[1:], strict=False)]
    early, late = sum(per_step[1:6]) / 5, sum(per_step[-5:]) / 5
    assert late <= early * 1.15, per_step
    assert max(per_step) < 4096, per_step  # a 5 KB tool body never enters history
    # ~3.3 KB: fields at their defaults are left out of payloads (noeta.temporal.converter); 4.0 KB when they were not.
    assert max(per_step) < 3500, per_step
    assert sum(sizes.values()) < (STEPS + 2) * 4096  # a whole-transcript design: ~2.4 MB here
