"""The composer: stable context first and cacheable, volatile context last, the plan recorded."""

from __future__ import annotations

import pytest

from noeta.client.options import HostConfig, Options
from noeta.context.composer import compose_messages, compose_system
from noeta.context.content_channel import ContentKindSpec
from noeta.errors import ConfigurationError
from noeta.protocols.messages import Message, TextBlock
from noeta.protocols.task import ChannelContent
from noeta.providers.anthropic import AnthropicProvider
from noeta.sdk._query import aquery
from noeta.sdk.testing import FakeLLMProvider
from tests.support.messages_server import (
    message,
    running_messages_server,
    text,
    tool_use,
)
from tests.support.scripts import call, say
from tests.support.tools import add

CHANNELS = [
    ContentKindSpec("policies", stable=True, max_chars=10_000),
    ContentKindSpec("today", stable=False),
]
CONTEXT = {"policies": "Refunds over 100 EUR need a manager.", "today": "Date: 2026-11-30. Queue: 14 open."}


def test_compose_system_puts_stable_channels_in_the_prefix():
    system, volatile, plan = compose_system(
        "Be terse.", [ChannelContent("policies", "P", True), ChannelContent("today", "T", False)]
    )
    assert system == "Be terse.\n\n## policies\nP"
    assert volatile == "## today\nT"
    assert (plan.system_chars, plan.volatile_chars, [c.name for c in plan.channels]) == (len(system), len(volatile), ["policies", "today"])


def test_compose_messages_marks_the_end_of_the_transcript():
    transcript = [Message("user", [TextBlock("hi")]), Message("assistant", [TextBlock("hello")])]
    messages, breakpoint_index = compose_messages(transcript, "## today\nT")
    assert breakpoint_index == 1 and messages[:2] == transcript
    assert (messages[2].role, messages[2].origin, messages[2].text) == ("user", "system", "## today\nT")
    assert compose_messages([], "") == ([], None)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        (dict(context={"nope": "x"}), "undeclared channel"),
        (dict(content_channels=[ContentKindSpec("a", max_chars=3)], context={"a": "four"}), "allows 3"),
        (dict(content_channels=[ContentKindSpec("a"), ContentKindSpec("a")]), "two content channels"),
    ],
)
def test_bad_channels_are_refused_up_front(options, match):
    with pytest.raises(ConfigurationError, match=match):
        Options(**options)


async def test_requests_keep_a_byte_identical_prefix_and_record_the_plan(host: HostConfig):
    provider = FakeLLMProvider(responses=[call(("c1", "add", {"a": 1, "b": 2})), say("3")])
    result = await aquery(
        Options(system_prompt="You handle refunds.", content_channels=CHANNELS, context=CONTEXT, allowed_tools=[add]),
        goal="refund 40 EUR?",
        provider=provider,
        host=host,
    )
    first, second = provider.received_requests
    assert first.system == second.system == "You handle refunds.\n\n## policies\nRefunds over 100 EUR need a manager."
    for request, transcript_length in ((first, 1), (second, 3)):
        assert request.messages[-1].text == "## today\nDate: 2026-11-30. Queue: 14 open."
        assert request.messages[-1].origin == "system"
        assert request.metadata["cache_breakpoint_message"] == transcript_length - 1
    assert second.messages[:2] == first.messages[:1] + [second.messages[1]]  # the transcript only grows
    [plan] = [e.payload for e in result.events if e.type == "ContextPlanComposed"]
    assert [(c.name, c.stable, c.chars) for c in plan.channels] == [
        ("policies", True, len(CONTEXT["policies"])),
        ("today", False, len(CONTEXT["today"])),
    ]
    assert plan.cached_prefix_chars == len(first.system) and plan.volatile_chars == len(first.messages[-1].text)
    # The volatile channel is the composer's, not the conversation's: it never enters the transcript.
    assert all("Queue: 14 open" not in getattr(i, "text", "") for i in result.messages())


async def test_anthropic_cache_breakpoints_and_cache_reads_over_the_wire(host: HostConfig):
    with running_messages_server() as server:
        server.reply(message([tool_use("c1", "add", {"a": 1, "b": 2})], "tool_use",
                             {"input_tokens": 40, "output_tokens": 9, "cache_creation_input_tokens": 300}))
        server.reply(message([text("3")], "end_turn",
                             {"input_tokens": 30, "output_tokens": 2, "cache_read_input_tokens": 300}))
        provider = AnthropicProvider(base_url=server.base_url, api_key="k", model="claude-test", name="anthropic-local")
        result = await aquery(
            Options(system_prompt="You handle refunds.", content_channels=CHANNELS, context=CONTEXT, allowed_tools=[add]),
            goal="refund 40 EUR?",
            provider=provider,
            host=host,
        )
    first, second = (seen.body for seen in server.seen)
    assert first["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first["system"] == second["system"]
    # In the second call the breakpoint sits on the last transcript block (the tool result), and
    # the volatile channel follows it uncached.
    last_turn = second["messages"][-1]["content"]
    marked = [b for b in last_turn if "cache_control" in b]
    assert [b["type"] for b in marked] == ["tool_result"]
    assert last_turn[-1] == {"type": "text", "text": "## today\nDate: 2026-11-30. Queue: 14 open."}
    assert (result.usage.cache_write, result.usage.cache_read, result.usage.uncached) == (300, 300, 70)
    assert result.usage.cache_read / result.usage.input == pytest.approx(300 / 670)
