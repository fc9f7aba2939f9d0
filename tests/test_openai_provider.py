"""OpenAIProvider against a real Chat Completions server on 127.0.0.1 (no httpx mocking)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from noeta.errors import ConfigurationError, ContextLengthError, ProviderError
from noeta.protocols.messages import (
    ContentRef,
    ImageBlock,
    LLMRequest,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from noeta.providers.defaults import KNOWN_PROVIDERS, default_provider
from noeta.providers.openai import OpenAIProvider
from tests.support.chat_server import (
    FakeChatServer,
    Pause,
    chunk,
    chunks_for,
    completion,
    error_body,
    running_chat_server,
)


@pytest.fixture(scope="module")
def chat_server() -> Iterator[FakeChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def server(chat_server: FakeChatServer) -> FakeChatServer:
    chat_server.replies.clear()
    chat_server.seen.clear()
    return chat_server


@pytest.fixture
def provider(server: FakeChatServer) -> OpenAIProvider:
    return OpenAIProvider(base_url=server.base_url, api_key="sk-test-123", model="gpt-test")


def ask(text: str = "hi", **kwargs: Any) -> LLMRequest:
    return LLMRequest(model=kwargs.pop("model", None), messages=[Message("user", [TextBlock(text)])], **kwargs)


WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


MULTI_TURN = LLMRequest(
    model=None,
    system="You are terse.",
    messages=[
        Message("user", [TextBlock("Weather in Paris and Rome?")], origin="human"),
        Message(
            "assistant",
            [
                TextBlock("Checking."),
                ToolUseBlock("call_a", "get_weather", {"city": "Paris"}),
                ToolUseBlock("call_b", "get_weather", {"city": "Rome"}),
            ],
        ),
        Message(
            "tool",
            [
                ToolResultBlock("call_a", "Sunny", success=True),
                ToolResultBlock("call_b", None, success=False, error="timeout"),
            ],
        ),
        Message("user", [TextBlock("[reminder] be brief")], origin="system"),
        Message("user", [TextBlock("Paris likes sun.")], origin="memory"),
    ],
    tools=[WEATHER_TOOL],
    temperature=0.2,
    max_tokens=100,
)

OUTPUT_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}

REQUESTS: dict[str, LLMRequest] = {
    "multi_turn": MULTI_TURN,
    "minimal": ask("hi"),
    "model_and_output_schema": ask("n?", model="gpt-other", output_schema=OUTPUT_SCHEMA),
    "effort": ask("think", effort="low", max_tokens=50),
    "image": LLMRequest(
        model=None,
        messages=[
            Message("user", [TextBlock("What is this?"), ImageBlock(ContentRef("0" * 64, 3, "image/png"), data="iVBO")]),
            Message("assistant", [ToolUseBlock("call_9", "zoom", {"x": 1})]),
            Message("tool", [ToolResultBlock("call_9", "zoomed", True, images=[ImageBlock(ContentRef("1" * 64, 3, "image/png"), data="iVBO")])]),
        ],
    ),
}

RESPONSES: dict[str, dict[str, Any]] = {
    "text": completion({"content": "Hello there."}),
    "tool_calls_stop": completion(
        {
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
                {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": '}},
            ],
        },
        # Some servers report "stop" even with tool calls: the calls decide.
        finish_reason="stop",
    ),
    "text_with_tool_call": completion(
        {
            "content": "Let me look.",
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        finish_reason="tool_calls",
    ),
    "cached_usage": completion(
        {"content": "ok"},
        usage={
            "prompt_tokens": 1200,
            "completion_tokens": 300,
            "total_tokens": 1500,
            "prompt_tokens_details": {"cached_tokens": 1024},
            "completion_tokens_details": {"reasoning_tokens": 256},
        },
    ),
    "length": completion({"content": "x"}, finish_reason="length"),
    "content_filter": completion({"content": "x"}, finish_reason="content_filter"),
}
# Off the OpenAI spec on purpose (some compatible servers send them); not wire-checked.
OFF_SPEC_RESPONSES: dict[str, dict[str, Any]] = {
    "null_finish_reason": completion({"content": "x"}, finish_reason=None),  # type: ignore[arg-type]
}

STREAMS: dict[str, list[Any]] = {
    name: chunks_for(RESPONSES[name]) for name in ("text", "text_with_tool_call", "cached_usage", "length")
}
STREAMS["two_tool_calls"] = [
    chunk({"role": "assistant", "content": None}),
    chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
    chunk({"tool_calls": [{"index": 1, "id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": '{"city":'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Oslo"}'}}]}),
    chunk({"tool_calls": [{"index": 1, "function": {"arguments": ' "Rome"}'}}]}),
    chunk({}, finish_reason="tool_calls"),
    chunk(None, usage={"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}),
]
STREAMS["reasoning"] = [
    chunk({"role": "assistant", "content": None}),
    chunk({"reasoning_content": "Greet "}),
    chunk({"reasoning_content": "briefly."}),
    chunk({"content": "Hi"}),
    chunk({"content": "!"}),
    chunk({}, finish_reason="stop"),
    chunk(None, usage={"prompt_tokens": 8, "completion_tokens": 6, "total_tokens": 14, "completion_tokens_details": {"reasoning_tokens": 4}}),
]


# -- request body -------------------------------------------------------------------------------


async def test_multi_turn_request_body(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(completion({"content": "Done."}))
    await provider.complete(MULTI_TURN)

    assert len(server.seen) == 1
    assert server.seen[0].path == "/v1/chat/completions"
    assert server.seen[0].body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "type": "function",
                        "id": "call_a",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "type": "function",
                        "id": "call_b",
                        "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "Sunny"},
            {"role": "tool", "tool_call_id": "call_b", "content": "timeout"},
            {"role": "user", "content": "[reminder] be brief"},
            {"role": "user", "content": "Paris likes sun."},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parameters": WEATHER_TOOL["input_schema"],
                },
            }
        ],
        "temperature": 0.2,
        "max_tokens": 100,
    }


async def test_minimal_body_omits_optional_fields(server: FakeChatServer) -> None:
    server.reply(completion({"content": "ok"}))
    await OpenAIProvider(base_url=server.base_url, api_key="").complete(ask("hi"))
    assert server.seen[0].body == {"messages": [{"role": "user", "content": "hi"}]}


async def test_request_model_and_output_schema(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(completion({"content": '{"n": 1}'}))
    await provider.complete(REQUESTS["model_and_output_schema"])
    body = server.seen[0].body
    assert body["model"] == "gpt-other"
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": OUTPUT_SCHEMA},
    }
    assert "tools" not in body


async def test_authorization_header(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(completion({"content": "ok"}))
    server.reply(completion({"content": "ok"}))
    await provider.complete(ask())
    await OpenAIProvider(base_url=server.base_url, api_key="").complete(ask())
    assert server.seen[0].headers["authorization"] == "Bearer sk-test-123"
    assert "authorization" not in server.seen[1].headers
    assert "sk-test-123" not in repr(provider)


# -- response parsing ---------------------------------------------------------------------------


async def test_text_response(server: FakeChatServer, provider: OpenAIProvider) -> None:
    payload = RESPONSES["text"]
    server.reply(payload)
    response = await provider.complete(ask())
    assert response.content == [TextBlock("Hello there.")]
    assert response.stop_reason == "end_turn"
    assert response.usage == Usage(uncached=10, output=3)
    assert response.raw == payload


@pytest.mark.parametrize(
    ("finish_reason", "expected"),
    [("stop", "end_turn"), ("length", "max_tokens"), ("content_filter", "end_turn"), (None, "end_turn")],
)
async def test_finish_reasons(
    server: FakeChatServer, provider: OpenAIProvider, finish_reason: str | None, expected: str
) -> None:
    server.reply(completion({"content": "x"}, finish_reason=finish_reason))  # type: ignore[arg-type]
    assert (await provider.complete(ask())).stop_reason == expected


async def test_tool_calls_and_malformed_arguments(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(RESPONSES["tool_calls_stop"])
    response = await provider.complete(ask("weather?", tools=[WEATHER_TOOL]))
    assert response.stop_reason == "tool_use"
    assert response.content == [
        ToolUseBlock("call_1", "get_weather", {"city": "Oslo"}),
        ToolUseBlock("call_2", "get_weather", {"_raw": '{"city": '}),
    ]


async def test_text_with_tool_call(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(RESPONSES["text_with_tool_call"])
    response = await provider.complete(ask())
    assert response.stop_reason == "tool_use"
    assert response.content == [TextBlock("Let me look."), ToolUseBlock("c", "f", {})]


async def test_usage_with_cached_and_reasoning_tokens(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(RESPONSES["cached_usage"])
    response = await provider.complete(ask())
    assert response.usage == Usage(uncached=176, cache_read=1024, output=300, reasoning_tokens=256)
    assert response.usage.input == 1200
    assert response.usage.visible_output == 44


# -- errors -------------------------------------------------------------------------------------


async def test_rate_limit_is_retryable_with_retry_after(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(error_body("Rate limit reached"), status=429, retry_after="2")
    with pytest.raises(ProviderError) as info:
        await provider.complete(ask())
    err = info.value
    assert (err.status, err.retryable, err.retry_after) == (429, True, 2.0)
    assert err.provider == "openai"
    assert err.message == "Rate limit reached"


async def test_bad_request_is_not_retryable(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(error_body("Invalid value for 'temperature'"), status=400)
    with pytest.raises(ProviderError) as info:
        await provider.complete(ask())
    assert not isinstance(info.value, ContextLengthError)
    assert (info.value.status, info.value.retryable) == (400, False)
    assert info.value.message == "Invalid value for 'temperature'"


async def test_context_length_error(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(
        error_body(
            "This model's maximum context length is 128000 tokens.", code="context_length_exceeded"
        ),
        status=400,
    )
    with pytest.raises(ContextLengthError) as info:
        await provider.complete(ask())
    assert info.value.retryable is False


async def test_server_error_is_retryable_and_text_body_kept(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(b"upstream overloaded", status=503)
    with pytest.raises(ProviderError) as info:
        await provider.complete(ask())
    assert (info.value.status, info.value.retryable) == (503, True)
    assert info.value.message == "upstream overloaded"


async def test_transport_errors_propagate_unclassified() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = OpenAIProvider(base_url=f"http://127.0.0.1:{port}/v1", api_key="", timeout=5)
    with pytest.raises(httpx.TransportError):
        await provider.complete(ask())


async def test_shared_http_client_is_used(server: FakeChatServer) -> None:
    server.reply(completion({"content": "ok"}))
    async with httpx.AsyncClient() as client:
        provider = OpenAIProvider(base_url=server.base_url, api_key="k", http_client=client)
        assert (await provider.complete(ask())).text == "ok"
        await provider.aclose()
        assert provider._client is None  # no private pool was created
        assert not client.is_closed  # and the caller's client is left to the caller


# -- streaming ----------------------------------------------------------------------------------


class Deltas:
    """An ``on_delta`` that records what it gets."""

    def __init__(self) -> None:
        self.got: list[tuple[str, str]] = []

    def __call__(self, kind: str, piece: str) -> None:
        self.got.append((kind, piece))

    def joined(self, kind: str) -> str:
        return "".join(p for k, p in self.got if k == kind)


async def test_stream_text_deltas_and_usage_chunk(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(STREAMS["text"])
    deltas = Deltas()
    response = await provider.stream(ask(), deltas)
    assert deltas.got == [("text", "Hell"), ("text", "o th"), ("text", "ere.")]
    assert response.content == [TextBlock("Hello there.")]
    assert response.stop_reason == "end_turn"
    assert response.usage == Usage(uncached=10, output=3)  # from the final usage chunk
    body = server.seen[0].body
    assert body == {
        **provider.request_body(ask()),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert server.seen[0].headers["accept"] == "text/event-stream"
    assert response.raw is not None
    assert response.raw["object"] == "chat.completion"
    assert response.raw["choices"][0]["message"] == {"role": "assistant", "content": "Hello there."}
    assert response.raw["usage"] == RESPONSES["text"]["usage"]


async def test_stream_asks_for_events_only(server: FakeChatServer) -> None:
    # One Accept header: the JSON one of a plain call must not ride along with the stream's.
    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    async with httpx.AsyncClient(event_hooks={"request": [record]}) as http:
        provider = OpenAIProvider(base_url=server.base_url, api_key="sk-test-123", model="gpt-test", http_client=http)
        server.reply(STREAMS["text"])
        await provider.stream(ask(), Deltas())
    assert sent[0].headers.get_list("accept") == ["text/event-stream"]


async def test_stream_tool_call_arguments_assembled_by_index(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(STREAMS["two_tool_calls"])
    deltas = Deltas()
    response = await provider.stream(ask(tools=[WEATHER_TOOL]), deltas)
    assert response.stop_reason == "tool_use"
    assert response.content == [
        ToolUseBlock("call_1", "get_weather", {"city": "Oslo"}),
        ToolUseBlock("call_2", "get_time", {"city": "Rome"}),
    ]
    # argument pieces are delivered as they arrive, interleaved across calls
    assert deltas.got == [
        ("tool_use", '{"ci'),
        ("tool_use", '{"city":'),
        ("tool_use", 'ty": "Oslo"}'),
        ("tool_use", ' "Rome"}'),
    ]
    assert response.usage == Usage(uncached=50, output=20)


@pytest.mark.parametrize("case", ["text", "text_with_tool_call", "cached_usage", "length"])
async def test_stream_assembles_what_complete_returns(server: FakeChatServer, provider: OpenAIProvider, case: str) -> None:
    server.reply(RESPONSES[case])
    server.reply(STREAMS[case])
    whole = await provider.complete(ask())
    streamed = await provider.stream(ask(), Deltas())
    assert (streamed.content, streamed.stop_reason, streamed.usage) == (whole.content, whole.stop_reason, whole.usage)
    assert streamed.raw == whole.raw  # the assembled body equals the non-streamed one


async def test_stream_reasoning_content_is_thinking(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(STREAMS["reasoning"])
    deltas = Deltas()
    response = await provider.stream(ask(), deltas)
    assert deltas.got == [("thinking", "Greet "), ("thinking", "briefly."), ("text", "Hi"), ("text", "!")]
    assert response.content == [TextBlock("Hi!")]
    assert response.usage.reasoning_tokens == 4


async def test_stream_without_usage_or_done(server: FakeChatServer, provider: OpenAIProvider) -> None:
    # A server that ignores include_usage and never sends [DONE] but does finish.
    server.reply(STREAMS["text"][:-1], done=False)
    response = await provider.stream(ask(), Deltas())
    assert (response.text, response.usage) == ("Hello there.", Usage())


async def test_stream_cut_short_is_retryable(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(STREAMS["text"][:3], done=False)  # no finish_reason, no [DONE]
    deltas = Deltas()
    with pytest.raises(ProviderError, match="stream ended early") as info:
        await provider.stream(ask(), deltas)
    assert info.value.retryable is True
    assert deltas.joined("text") == "Hello th"


async def test_stream_error_before_the_stream(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(error_body("Rate limit reached"), status=429, retry_after="2")
    server.reply(error_body("This model's maximum context length is 8192 tokens.", code="context_length_exceeded"), status=400)
    with pytest.raises(ProviderError) as info:
        await provider.stream(ask(), Deltas())
    assert (info.value.status, info.value.retryable, info.value.retry_after) == (429, True, 2.0)
    assert info.value.message == "Rate limit reached"
    with pytest.raises(ContextLengthError):
        await provider.stream(ask(), Deltas())


async def test_stream_error_chunk_midway(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply([*STREAMS["text"][:2], {"error": {"message": "upstream died", "type": "server_error", "code": None}}])
    with pytest.raises(ProviderError) as info:
        await provider.stream(ask(), Deltas())
    assert (info.value.retryable, info.value.message) == (True, "upstream died")


async def test_stream_framing_as_servers_write_it(server: FakeChatServer, provider: OpenAIProvider) -> None:
    """Keep-alive comments, fields without data, CRLF line ends (one cut between two writes), an
    event cut between two writes, data over two lines and an unescaped line separator inside the
    JSON all fold like the plain stream."""
    role, hell, o_th, *rest = STREAMS["text"]
    separator = json.dumps(chunk({"content": "\u2028"}), ensure_ascii=False)  # U+2028 sent as is
    cut = json.dumps(o_th)
    server.reply([
        ": OPENROUTER PROCESSING\n\n",
        "event: ping\n\n",
        "retry: 3000\nid: 7\n\n",
        f"data: {json.dumps(role)}\r\n\r\n",
        f"data: {json.dumps(hell)}\r",
        "\n\r\n",
        f"data: {separator}\n\n",
        f"data: {cut[:9]}",
        f"{cut[9:]}".replace(", ", ",\ndata: ", 1) + "\n\n",
        *rest,
    ])
    deltas = Deltas()
    response = await provider.stream(ask(), deltas)
    assert deltas.got == [("text", "Hell"), ("text", "\u2028"), ("text", "o th"), ("text", "ere.")]
    assert response.text == "Hell\u2028o there."
    assert response.usage == Usage(uncached=10, output=3)


async def test_stream_answered_with_a_page_is_retryable(server: FakeChatServer, provider: OpenAIProvider) -> None:
    # A proxy's page with a 200 in place of the event stream.
    server.reply(["<html>upstream busy</html>"], done=False, content_type="text/html")
    with pytest.raises(ProviderError, match="text/event-stream") as info:
        await provider.stream(ask(), Deltas())
    assert info.value.retryable is True
    assert "upstream busy" in info.value.message


async def test_stream_answered_without_streaming(server: FakeChatServer, provider: OpenAIProvider) -> None:
    # Some compatible servers ignore "stream": true and send one JSON body.
    server.reply(RESPONSES["text"])
    deltas = Deltas()
    response = await provider.stream(ask(), deltas)
    assert deltas.got == [("text", "Hello there.")]
    assert response.raw == RESPONSES["text"]


async def test_cancelling_a_stream_closes_the_connection(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.disconnects = 0
    server.disconnected.clear()
    events = STREAMS["text"]
    server.reply([*events[:2], Pause(10), *events[2:]])
    first = asyncio.Event()
    task = asyncio.create_task(provider.stream(ask(), lambda kind, piece: first.set()))
    await asyncio.wait_for(first.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(server.disconnected.wait, 5)
    assert server.disconnects == 1
    server.reply(RESPONSES["text"])
    assert (await provider.complete(ask())).text == "Hello there."


# -- default_provider ---------------------------------------------------------------------------


def test_default_provider_from_api_key(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OPENAI_API_KEY", "sk-env")
    provider = default_provider(None)
    assert isinstance(provider, OpenAIProvider)
    assert (provider.base_url, provider.model) == ("https://api.openai.com/v1", "gpt-4o-mini")
    clean_env.setenv("NOETA_MODEL", "gpt-4.1")
    clean_env.setenv("OPENAI_BASE_URL", "http://gateway.local/v1/")
    provider = default_provider("openai")
    assert isinstance(provider, OpenAIProvider)
    assert (provider.base_url, provider.model) == ("http://gateway.local/v1", "gpt-4.1")


async def test_default_provider_keyless_base_url(clean_env: pytest.MonkeyPatch, server: FakeChatServer) -> None:
    clean_env.setenv("OPENAI_BASE_URL", server.base_url)
    provider = default_provider(None)
    assert isinstance(provider, OpenAIProvider)
    server.reply(completion({"content": "ok"}))
    assert (await provider.complete(ask())).text == "ok"
    assert "authorization" not in server.seen[0].headers


def test_default_provider_errors(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        default_provider("openai")
    with pytest.raises(ConfigurationError) as info:
        default_provider("gemini")
    assert set(KNOWN_PROVIDERS) == {"anthropic", "openai", "local"}
    for known in KNOWN_PROVIDERS:
        assert known in str(info.value)


@pytest.mark.parametrize("part", ["local_text", "needle_router"])
def test_missing_local_packages_is_a_configuration_error(clean_env: pytest.MonkeyPatch, part: str) -> None:
    """Either model of the local default missing (the text model's llama.cpp or weights, or the
    tool router) is a ConfigurationError that says how to install it."""
    import importlib

    clean_env.setattr(importlib.import_module(f"noeta.providers.{part}"), "_spec", lambda name: None)
    with pytest.raises(ConfigurationError, match=r"pip install 'noeta\[local\]'"):
        default_provider("local")
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY or OPENAI_API_KEY"):
        default_provider(None)
