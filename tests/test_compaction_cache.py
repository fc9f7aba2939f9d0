"""A compaction's summary is asked on the task's own cached prefix, and a refused request teaches
the task its model's window (docs/long-running.md). The provider is a real HTTP server speaking
OpenAI's Chat Completions protocol with a prefix cache (tests/support/prefix_cache_server.py)."""

from __future__ import annotations

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.protocols.messages import Usage
from tests.support.chat_server import openai_for
from tests.support.http_handler import running
from tests.support.prefix_cache_server import SYSTEM_PROMPT, PrefixCacheServer
from tests.support.windowed import fetch_short


def compactions(events: list) -> list:
    return [e.payload for e in events if e.type == "ContextCompacted"]


async def test_every_summary_of_a_100_turn_task_is_asked_on_its_cached_prefix(client: AsyncClient, serve, task_queue):
    with running(PrefixCacheServer(turns=100, window=3000)) as server:
        provider = openai_for(server, "prefix-cached")
        options = Options(provider=provider, allowed_tools=[fetch_short], system_prompt=SYSTEM_PROMPT,
                          max_turns=120, context_window_tokens=3000)
        async with serve(tools=[fetch_short], providers=[provider]):
            task_id = await client.start("fetch every chunk", options, task_queue=task_queue)
            result = await client.result(task_id)
    assert (result.status, result.answer) == ("completed", "fetched 100 chunks")
    answered = server.answered
    summaries = [i for i, a in enumerate(answered) if a.summarizing]
    compacted = compactions(await client.events(task_id))
    assert len(compacted) == len(summaries) >= 5 and not any(a.refused for a in answered)
    first = answered[0].body
    for i in summaries:
        body = answered[i].body
        # The same system prompt and tools, then the messages the task's last request sent, then the instruction.
        assert body["messages"][0] == first["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
        assert body["tools"] == first["tools"]
        previous = answered[i - 1].body["messages"]
        folded = body["messages"][:-1]
        assert len(folded) > 2 and previous[: len(folded)] == folded
        assert answered[i].cached_tokens >= len(SYSTEM_PROMPT) // 4
    # The summaries' usage, as the events record it, is mostly served by the cache.
    assert all(c.usage.cache_read > 0 and c.usage.cache_read > c.usage.uncached for c in compacted), [c.usage for c in compacted]
    cached = sum((c.usage for c in compacted), Usage())
    print(f"100 turns: {len(compacted)} summaries, {cached.cache_read} of {cached.cache_read + cached.uncached} "
          "input tokens from the cache")


async def test_a_refused_request_teaches_the_window_and_later_compactions_come_first(
    client: AsyncClient, serve, task_queue
):
    """A window configured four times too large: the provider refuses once; the compaction records
    the refused size, and the task plans with the provider's window from then on (across
    continue-as-new): every later compaction comes by the threshold, before a refusal."""
    with running(PrefixCacheServer(turns=60, window=3000)) as server:
        provider = openai_for(server, "too-small")
        options = Options(provider=provider, allowed_tools=[fetch_short], max_turns=80,
                          context_window_tokens=12000, max_history_events=200)
        async with serve(tools=[fetch_short], providers=[provider]):
            task_id = await client.start("fetch every chunk", options, task_queue=task_queue)
            result = await client.result(task_id)
    assert (result.status, result.answer) == ("completed", "fetched 60 chunks")
    refused = [a.prompt_tokens for a in server.answered if a.refused]
    events = await client.events(task_id)
    compacted = compactions(events)
    assert len(refused) == 1 and len(compacted) >= 3
    first, *later = compacted
    assert (first.reason, first.tokens_before, first.window_tokens) == ("context_length", refused[0], 3000)
    assert all((c.reason, c.window_tokens) == ("threshold", 3000) and c.tokens_before <= 3000 for c in later)
    continued = [e.seq for e in events if e.type == "TaskContinuedAsNew"]
    assert continued and any(e.seq > continued[0] for e in events if e.type == "ContextCompacted")
