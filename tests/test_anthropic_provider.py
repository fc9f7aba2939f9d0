"""AnthropicProvider against a real Messages API server on 127.0.0.1 (no httpx mocking).

The request cases (``REQUESTS``) and reply payloads (``RESPONSES``, ``STREAMS``) are module tables
so that tests/test_wire_shapes.py can check the very same bodies against the ``anthropic``
package's types.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from noeta.errors import ConfigurationError, ContextLengthError, ProviderError
from noeta.protocols.messages import (
    ContentRef,
    ImageBlock,
    LLMRequest,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from noeta.providers.anthropic import JSON_INSTRUCTION, AnthropicProvider
from noeta.providers.defaults import default_provider
from noeta.providers.openai import OpenAIProvider
from tests.support.messages_server import (
    FakeMessagesServer,
    Pause,
    anthropic_error,
    events_for,
    message,
    running_messages_server,
    text,
    thinking,
    tool_use,
)

EPHEMERAL = {"type": "ephemeral"}

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TIME_TOOL = {
    "name": "get_time",
    "description": "Local time in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def ask(prompt: str = "hi", **kwargs: Any) -> LLMRequest:
    return LLMRequest(model=kwargs.pop("model", None), messages=[Message("user", [TextBlock(prompt)])], **kwargs)


MULTI_TURN = LLMRequest(
    model=None,
    system="You are terse.",
    messages=[
        Message("user", [TextBlock("Weather in Paris and Rome?")], origin="human"),
        Message(
            "assistant",
            [
                TextBlock("Checking."),
                ToolUseBlock("toolu_a", "get_weather", {"city": "Paris"}),
                ToolUseBlock("toolu_b", "get_weather", {"city": "Rome"}),
            ],
        ),
        Message(
            "tool",
            [
                ToolResultBlock("toolu_a", "Sunny", success=True),
                ToolResultBlock("toolu_b", None, success=False, error="timeout"),
            ],
        ),
        Message("user", [TextBlock("[reminder] be brief")], origin="system"),
        Message("user", [TextBlock("Paris likes sun.")], origin="memory"),
    ],
    tools=[WEATHER_TOOL, TIME_TOOL],
    temperature=0.2,
    max_tokens=100,
)

MULTI_TURN_BODY = {
    "model": "claude-test",
    "max_tokens": 100,
    "system": [{"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {"city": "Rome"}},
            ],
        },
        {
            # The tool-result turn and the two injected user turns merge into one user turn.
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "Sunny", "is_error": False},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "timeout", "is_error": True},
                {"type": "text", "text": "[reminder] be brief"},
                {"type": "text", "text": "Paris likes sun."},
            ],
        },
    ],
    "tools": [
        {"name": "get_weather", "description": "Weather for a city", "input_schema": WEATHER_TOOL["input_schema"]},
        {
            "name": "get_time",
            "description": "Local time in a city",
            "input_schema": TIME_TOOL["input_schema"],
            "cache_control": EPHEMERAL,
        },
    ],
    "temperature": 0.2,
}

OUTPUT_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

REQUESTS: dict[str, LLMRequest] = {
    "image": LLMRequest(
        model=None,
        messages=[
            Message("user", [TextBlock("What is this?"), ImageBlock(ContentRef("0" * 64, 3, "image/png"), data="iVBO")]),
            Message("assistant", [ToolUseBlock("call_9", "zoom", {"x": 1})]),
            Message("tool", [ToolResultBlock("call_9", "zoomed", True, images=[ImageBlock(ContentRef("1" * 64, 3, "image/png"), data="iVBO")])]),
        ],
    ),
    "multi_turn": MULTI_TURN,
    "minimal": ask("hi"),
    "thinking": ask(
        "Think first.", thinking={"type": "enabled", "budget_tokens": 2048}, temperature=0.5, effort="high"
    ),
    "output_schema": ask("n?", system="Count.", output_schema=OUTPUT_SCHEMA),
    "output_schema_no_system": ask("n?", output_schema=OUTPUT_SCHEMA),
    "cache_breakpoint": LLMRequest(
        model="claude-other",
        system="Stable.",
        messages=MULTI_TURN.messages,
        tools=[WEATHER_TOOL],
        metadata={"cache_breakpoint_message": 2},
    ),
    "image_skipped": LLMRequest(
        model=None,
        messages=[
            Message("user", [TextBlock("What is this?"), ImageBlock(ContentRef("ab" * 32, 10, "image/png"))])
        ],
    ),
    # Thinking across a tool round: the assistant turn's signed thinking goes back with its result.
    "thinking_tool_round": LLMRequest(
        model=None,
        thinking={"type": "enabled", "budget_tokens": 2048},
        messages=[
            Message("user", [TextBlock("Weather in Oslo?")]),
            Message(
                "assistant",
                [
                    ThinkingBlock("Need the weather tool.", signature="sig-1"),
                    ThinkingBlock(redacted="ZW5jcnlwdGVk"),
                    ThinkingBlock("unsigned, never sent"),
                    ToolUseBlock("toolu_w", "get_weather", {"city": "Oslo"}),
                ],
            ),
            Message("tool", [ToolResultBlock("toolu_w", "sunny", True)]),
        ],
        tools=[WEATHER_TOOL],
    ),
    "empty_tool_error": LLMRequest(
        model=None,
        messages=[
            Message("user", [TextBlock("go")]),
            Message("assistant", [ToolUseBlock("toolu_z", "get_time", {})]),
            Message("tool", [ToolResultBlock("toolu_z", "", success=False)]),
        ],
    ),
}

USAGE_CACHED = {
    "input_tokens": 40,
    "cache_read_input_tokens": 1800,
    "cache_creation_input_tokens": 300,
    "output_tokens": 250,
    "output_tokens_details": {"thinking_tokens": 200},
}

RESPONSES: dict[str, dict[str, Any]] = {
    "text": message([text("Hello there.")]),
    "tool_use": message(
        [text("Let me look."), tool_use("toolu_1", "get_weather", {"city": "Oslo", "days": [1, 2]})],
        stop_reason="tool_use",
    ),
    "thinking_then_text": message(
        [thinking("The user wants a greeting."), text("Hi!")], usage=USAGE_CACHED
    ),
    "max_tokens": message([text("Once upon a")], stop_reason="max_tokens"),
    "stop_sequence": message([text("x")], stop_reason="stop_sequence"),
    "refusal": message([text("I can't help with that.")], stop_reason="refusal"),
    "pause_turn": message([], stop_reason="pause_turn"),
    "window_exceeded": message([text("long")], stop_reason="model_context_window_exceeded"),
}

STREAMS: dict[str, list[Any]] = {name: events_for(payload) for name, payload in RESPONSES.items()}
STREAMS["overloaded_midway"] = [
    *events_for(RESPONSES["text"])[:4],
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
]

ERRORS: dict[str, dict[str, Any]] = {
    "rate_limit": anthropic_error("Number of request tokens has exceeded your rate limit", "rate_limit_error"),
    "bad_request": anthropic_error("temperature: range: 0..1"),
    "overloaded": anthropic_error("Overloaded", "overloaded_error"),
    "too_long": anthropic_error("prompt is too long: 208310 tokens > 200000 maximum"),
}


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def messages_server() -> Iterator[FakeMessagesServer]:
    with running_messages_server() as server:
        yield server


@pytest.fixture
def server(messages_server: FakeMessagesServer) -> FakeMessagesServer:
    messages_server.replies.clear()
    messages_server.seen.clear()
    messages_server.disconnects = 0
    messages_server.disconnected.clear()
    return messages_server


@pytest.fixture
def provider(server: FakeMessagesServer) -> AnthropicProvider:
    return AnthropicProvider(base_url=server.base_url, api_key="sk-ant-test", model="claude-test")


class Deltas:
    """An ``on_delta`` that records what it gets."""

    def __init__(self) -> None:
        self.got: list[tuple[str, str]] = []

    def __call__(self, kind: str, piece: str) -> None:
        self.got.append((kind, piece))

    def joined(self, kind: str) -> str:
        return "".join(p for k, p in self.got if k == kind)


# -- request body -------------------------------------------------------------------------------


async def test_multi_turn_request_body(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(RESPONSES["text"])
    await provider.complete(MULTI_TURN)
    assert len(server.seen) == 1
    assert server.seen[0].path == "/v1/messages"
    assert server.seen[0].body == MULTI_TURN_BODY


async def test_headers(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(RESPONSES["text"])
    server.reply(RESPONSES["text"])
    await provider.complete(ask())
    await AnthropicProvider(base_url=server.base_url, api_key="", model="m", anthropic_version="2099-01-01").complete(ask())
    first, second = server.seen
    assert first.headers["x-api-key"] == "sk-ant-test"
    assert first.headers["anthropic-version"] == "2023-06-01"
    assert first.headers["content-type"] == "application/json"
    assert "authorization" not in first.headers
    assert "x-api-key" not in second.headers  # key-less compatible server
    assert second.headers["anthropic-version"] == "2099-01-01"
    assert "sk-ant-test" not in repr(provider)


def test_api_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    assert AnthropicProvider(model="m")._headers()["x-api-key"] == "sk-ant-env"
    assert "x-api-key" not in AnthropicProvider(model="m", api_key="")._headers()


async def test_minimal_body(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(RESPONSES["text"])
    await provider.complete(REQUESTS["minimal"])
    # max_tokens is required by the API: the default fills in; no system, no tools, no breakpoints.
    assert server.seen[0].body == {
        "model": "claude-test",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }


async def test_model_is_required() -> None:
    provider = AnthropicProvider(base_url="http://127.0.0.1:9", api_key="")
    with pytest.raises(ConfigurationError, match="model"):
        await provider.complete(ask())
    assert provider.request_body(ask(model="claude-x"))["model"] == "claude-x"


def test_thinking_blocks_go_back_with_the_tool_round(provider: AnthropicProvider) -> None:
    body = provider.request_body(REQUESTS["thinking_tool_round"])
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Need the weather tool.", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
            {"type": "tool_use", "id": "toolu_w", "name": "get_weather", "input": {"city": "Oslo"}},
        ],
    }


def test_thinking_passes_through_and_drops_temperature(provider: AnthropicProvider) -> None:
    body = provider.request_body(REQUESTS["thinking"])
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in body  # the API rejects temperature with thinking on
    assert body["max_tokens"] == 2048 + 4096  # must exceed the budget
    assert body["output_config"] == {"effort": "high"}
    assert provider.request_body(ask(effort="minimal"))["output_config"] == {"effort": "low"}  # OpenAI-only value
    off = provider.request_body(ask(thinking={"type": "disabled"}, temperature=0.5, max_tokens=10))
    assert (off["thinking"], off["temperature"], off["max_tokens"]) == ({"type": "disabled"}, 0.5, 10)


def test_temperature_is_not_sent_from_api_version_2026_10_21() -> None:
    request = ask(temperature=0.3)
    old = AnthropicProvider(api_key="", model="m")
    new = AnthropicProvider(api_key="", model="m", anthropic_version="2026-10-21")
    assert old.request_body(request)["temperature"] == 0.3
    assert "temperature" not in new.request_body(request)  # that version removed sampling params
    assert new._headers()["anthropic-version"] == "2026-10-21"


def test_output_schema_becomes_a_system_instruction(provider: AnthropicProvider) -> None:
    schema_text = json.dumps(OUTPUT_SCHEMA, sort_keys=True)
    body = provider.request_body(REQUESTS["output_schema"])
    assert body["system"] == [
        {"type": "text", "text": f"Count.\n\n{JSON_INSTRUCTION}{schema_text}", "cache_control": EPHEMERAL}
    ]
    assert "response_format" not in body and "output_config" not in body
    body = provider.request_body(REQUESTS["output_schema_no_system"])
    assert body["system"][0]["text"] == JSON_INSTRUCTION + schema_text


def test_cache_breakpoint_message(provider: AnthropicProvider) -> None:
    body = provider.request_body(REQUESTS["cache_breakpoint"])
    assert body["model"] == "claude-other"
    marked = [
        (t, i)
        for t, turn in enumerate(body["messages"])
        for i, block in enumerate(turn["content"])
        if "cache_control" in block
    ]
    # Transcript message 2 (the tool results) ends with the second tool_result of turn 2.
    assert marked == [(2, 1)]
    assert body["messages"][2]["content"][1]["cache_control"] == EPHEMERAL
    assert body["tools"][-1]["cache_control"] == EPHEMERAL
    assert body["system"][0]["cache_control"] == EPHEMERAL

    def marks(index: Any) -> list[tuple[int, int]]:
        b = provider.request_body(LLMRequest(model=None, messages=MULTI_TURN.messages, metadata={"cache_breakpoint_message": index}))
        return [(t, i) for t, turn in enumerate(b["messages"]) for i, blk in enumerate(turn["content"]) if "cache_control" in blk]

    assert marks(-1) == [(2, 3)]  # the last message: the memory text at the end of the merged turn
    assert marks(1) == [(1, 2)]
    assert marks(99) == [] and marks(True) == [] and marks("2") == []
    # The request's own blocks are never mutated.
    assert "cache_control" not in json.dumps(provider.request_body(LLMRequest(model=None, messages=MULTI_TURN.messages)))


def test_images_are_skipped_and_empty_error_results_get_text(provider: AnthropicProvider) -> None:
    body = provider.request_body(REQUESTS["image_skipped"])
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "What is this?"}]}]
    body = provider.request_body(REQUESTS["empty_tool_error"])
    assert body["messages"][-1] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_z", "content": "error", "is_error": True}],
    }


def test_tools_are_not_mutated(provider: AnthropicProvider) -> None:
    tools = [dict(WEATHER_TOOL)]
    provider.request_body(ask(tools=tools))
    assert tools == [WEATHER_TOOL]


# -- response parsing ---------------------------------------------------------------------------


async def test_text_response(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(RESPONSES["text"])
    response = await provider.complete(ask())
    assert response.content == [TextBlock("Hello there.")]
    assert response.stop_reason == "end_turn"
    assert response.usage == Usage(uncached=12, output=5)
    assert response.raw == RESPONSES["text"]


async def test_tool_use_response(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(RESPONSES["tool_use"])
    response = await provider.complete(ask(tools=[WEATHER_TOOL]))
    assert response.stop_reason == "tool_use"
    assert response.content == [
        TextBlock("Let me look."),
        ToolUseBlock("toolu_1", "get_weather", {"city": "Oslo", "days": [1, 2]}),
    ]


async def test_thinking_is_kept_and_cache_usage_counted(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(RESPONSES["thinking_then_text"])
    response = await provider.complete(ask())
    assert response.content == [ThinkingBlock("The user wants a greeting.", signature="sig-abc"), TextBlock("Hi!")]
    assert response.text == "Hi!"  # thinking is not part of the answer
    assert response.usage == Usage(uncached=40, cache_read=1800, cache_write=300, output=250, reasoning_tokens=200)
    assert response.usage.input == 2140
    assert response.raw is not None and response.raw["content"][0]["type"] == "thinking"


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("text", "end_turn"),
        ("tool_use", "tool_use"),
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "end_turn"),
        ("refusal", "end_turn"),
        ("pause_turn", "end_turn"),
        ("window_exceeded", "max_tokens"),
    ],
)
async def test_stop_reasons(server: FakeMessagesServer, provider: AnthropicProvider, case: str, expected: str) -> None:
    server.reply(RESPONSES[case])
    assert (await provider.complete(ask())).stop_reason == expected


async def test_tool_use_stop_without_tool_blocks(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(message([text("hm")], stop_reason="tool_use"))
    assert (await provider.complete(ask())).stop_reason == "end_turn"


# -- errors -------------------------------------------------------------------------------------


async def test_rate_limit_is_retryable_with_retry_after(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(ERRORS["rate_limit"], status=429, retry_after="7")
    with pytest.raises(ProviderError) as info:
        await provider.complete(ask())
    err = info.value
    assert (err.status, err.retryable, err.retry_after, err.provider) == (429, True, 7.0, "anthropic")
    assert err.message == "Number of request tokens has exceeded your rate limit"


async def test_bad_request_is_not_retryable(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(ERRORS["bad_request"], status=400)
    with pytest.raises(ProviderError) as info:
        await provider.complete(ask())
    assert not isinstance(info.value, ContextLengthError)
    assert (info.value.status, info.value.retryable, info.value.message) == (400, False, "temperature: range: 0..1")


async def test_overloaded_529_is_retryable(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(ERRORS["overloaded"], status=529)
    with pytest.raises(ProviderError) as info:
        await provider.complete(ask())
    assert (info.value.status, info.value.retryable, info.value.message) == (529, True, "Overloaded")


async def test_prompt_too_long_is_a_context_length_error(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(ERRORS["too_long"], status=400)
    with pytest.raises(ContextLengthError) as info:
        await provider.complete(ask())
    assert info.value.retryable is False
    assert "prompt is too long" in info.value.message


async def test_non_json_error_body_is_kept(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(b"bad gateway", status=502)
    with pytest.raises(ProviderError) as info:
        await provider.complete(ask())
    assert (info.value.status, info.value.retryable, info.value.message) == (502, True, "bad gateway")


# -- streaming ----------------------------------------------------------------------------------


async def test_stream_text_deltas_in_order(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(STREAMS["text"])
    deltas = Deltas()
    response = await provider.stream(ask(), deltas)
    assert deltas.got == [("text", "Hell"), ("text", "o th"), ("text", "ere.")]
    assert response.content == [TextBlock("Hello there.")]
    assert response.stop_reason == "end_turn"
    # input from message_start, output from message_delta
    assert response.usage == Usage(uncached=12, output=5)
    body = server.seen[0].body
    assert body["stream"] is True
    assert {k: v for k, v in body.items() if k != "stream"} == provider.request_body(ask())
    assert server.seen[0].headers["accept"] == "text/event-stream"


async def test_stream_tool_use_input_is_assembled(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(STREAMS["tool_use"])
    deltas = Deltas()
    response = await provider.stream(ask(tools=[WEATHER_TOOL]), deltas)
    assert response.stop_reason == "tool_use"
    assert response.content == [
        TextBlock("Let me look."),
        ToolUseBlock("toolu_1", "get_weather", {"city": "Oslo", "days": [1, 2]}),
    ]
    assert deltas.joined("text") == "Let me look."
    assert json.loads(deltas.joined("tool_use")) == {"city": "Oslo", "days": [1, 2]}
    assert len([k for k, _ in deltas.got if k == "tool_use"]) == 3


@pytest.mark.parametrize("case", sorted(RESPONSES))
async def test_stream_assembles_what_complete_returns(
    server: FakeMessagesServer, provider: AnthropicProvider, case: str
) -> None:
    server.reply(RESPONSES[case])
    server.reply(STREAMS[case])
    whole = await provider.complete(ask())
    streamed = await provider.stream(ask(), Deltas())
    assert (streamed.content, streamed.stop_reason, streamed.usage) == (whole.content, whole.stop_reason, whole.usage)
    # raw is the assembled message: the same as the non-streamed body
    assert streamed.raw == whole.raw


async def test_stream_thinking_deltas_and_usage(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(STREAMS["thinking_then_text"])
    deltas = Deltas()
    response = await provider.stream(ask(), deltas)
    assert deltas.joined("thinking") == "The user wants a greeting."
    assert [k for k, _ in deltas.got] == ["thinking"] * 3 + ["text"] * 3
    # The signature arrives in its own delta; the block is kept for the next tool round.
    assert response.content == [ThinkingBlock("The user wants a greeting.", signature="sig-abc"), TextBlock("Hi!")]
    assert response.raw is not None and response.raw["content"][0]["signature"] == "sig-abc"
    assert response.usage == Usage(uncached=40, cache_read=1800, cache_write=300, output=250, reasoning_tokens=200)


async def test_stream_events_named_by_their_event_line(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    """The event's name stands in for a ``type`` missing from its data; CRLF line ends and
    keep-alive comments between events change nothing."""
    framed = []
    for event in STREAMS["text"]:
        data = {k: v for k, v in event.items() if k != "type"}
        framed += [": keep-alive\r\n\r\n", f"event: {event['type']}\r\ndata: {json.dumps(data)}\r\n\r\n"]
    server.reply(framed)
    deltas = Deltas()
    response = await provider.stream(ask(), deltas)
    assert deltas.joined("text") == response.text == "Hello there."
    assert (response.stop_reason, response.usage) == ("end_turn", Usage(uncached=12, output=5))


async def test_stream_without_message_start(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    # A lax compatible server may start straight with content_block_start.
    server.reply(STREAMS["text"][1:])
    response = await provider.stream(ask(), Deltas())
    assert response.text == "Hello there."
    assert response.usage == Usage(output=5)
    assert response.raw is not None and response.raw["model"] == "claude-test"


async def test_stream_answered_without_streaming(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    # A compatible server that ignores "stream": true and sends one JSON body.
    server.reply(RESPONSES["tool_use"])
    deltas = Deltas()
    response = await provider.stream(ask(), deltas)
    assert deltas.got == [("text", "Let me look.")]
    assert response.raw == RESPONSES["tool_use"] and response.stop_reason == "tool_use"


async def test_stream_async_on_delta(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(STREAMS["text"])
    got: list[str] = []

    async def on_delta(kind: str, piece: str) -> None:
        await asyncio.sleep(0)
        got.append(piece)

    await provider.stream(ask(), on_delta)
    assert "".join(got) == "Hello there."


@pytest.mark.parametrize(
    ("error", "status", "expected_type", "retryable"),
    [
        ("rate_limit", 429, ProviderError, True),
        ("bad_request", 400, ProviderError, False),
        ("overloaded", 529, ProviderError, True),
        ("too_long", 400, ContextLengthError, False),
    ],
)
async def test_stream_error_before_the_stream(
    server: FakeMessagesServer, provider: AnthropicProvider, error: str, status: int, expected_type: type, retryable: bool
) -> None:
    server.reply(ERRORS[error], status=status, retry_after="3")
    deltas = Deltas()
    with pytest.raises(expected_type) as info:
        await provider.stream(ask(), deltas)
    assert (info.value.status, info.value.retryable) == (status, retryable)
    assert info.value.message == ERRORS[error]["error"]["message"]
    assert deltas.got == []


async def test_stream_error_event_midway(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(STREAMS["overloaded_midway"])
    deltas = Deltas()
    with pytest.raises(ProviderError) as info:
        await provider.stream(ask(), deltas)
    assert (info.value.status, info.value.retryable, info.value.message) == (529, True, "Overloaded")
    assert deltas.got == [("text", "Hell")]  # what arrived before the error was delivered


async def test_stream_cut_short_is_retryable(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    server.reply(STREAMS["text"][:-2])  # no message_delta, no message_stop
    with pytest.raises(ProviderError, match="stream ended early") as info:
        await provider.stream(ask(), Deltas())
    assert info.value.retryable is True


async def test_cancelling_a_stream_closes_the_connection(server: FakeMessagesServer, provider: AnthropicProvider) -> None:
    events = STREAMS["text"]
    server.reply([*events[:4], Pause(10), *events[4:]])
    first = asyncio.Event()

    def on_delta(kind: str, piece: str) -> None:
        first.set()

    task = asyncio.create_task(provider.stream(ask(), on_delta))
    await asyncio.wait_for(first.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The server sees the client hang up long before its pause would end.
    assert await asyncio.to_thread(server.disconnected.wait, 5)
    assert server.disconnects == 1
    # and the provider still works afterwards
    server.reply(RESPONSES["text"])
    assert (await provider.complete(ask())).text == "Hello there."


# -- default_provider ---------------------------------------------------------------------------


def test_default_provider_prefers_anthropic_key(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OPENAI_API_KEY", "sk-openai")
    clean_env.setenv("ANTHROPIC_API_KEY", "sk-ant")
    provider = default_provider(None)
    assert isinstance(provider, AnthropicProvider)
    assert (provider.base_url, provider.model) == ("https://api.anthropic.com", "claude-sonnet-4-5")
    assert provider._headers()["x-api-key"] == "sk-ant"
    clean_env.setenv("NOETA_MODEL", "claude-opus-4-1")
    clean_env.setenv("ANTHROPIC_BASE_URL", "http://gateway.local/")
    provider = default_provider("anthropic")
    assert isinstance(provider, AnthropicProvider)
    assert (provider.base_url, provider.model) == ("http://gateway.local", "claude-opus-4-1")
    assert isinstance(default_provider("openai"), OpenAIProvider)


async def test_default_provider_keyless_anthropic_base_url(clean_env: pytest.MonkeyPatch, server: FakeMessagesServer) -> None:
    clean_env.setenv("ANTHROPIC_BASE_URL", server.base_url)
    provider = default_provider("anthropic")
    assert isinstance(provider, AnthropicProvider)
    server.reply(RESPONSES["text"])
    assert (await provider.complete(ask())).text == "Hello there."
    assert "x-api-key" not in server.seen[0].headers
    assert server.seen[0].body["model"] == "claude-sonnet-4-5"
    # Without a key, None keeps resolving through the OpenAI rules.
    clean_env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert isinstance(default_provider(None), OpenAIProvider)


def test_default_provider_anthropic_unconfigured(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        default_provider("anthropic")
