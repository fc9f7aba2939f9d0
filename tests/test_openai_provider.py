"""OpenAIProvider against a real Chat Completions server on 127.0.0.1 (no httpx mocking)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from noeta.errors import ConfigurationError, ContextLengthError, ProviderError
from noeta.protocols.messages import (
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


# -- request body -------------------------------------------------------------------------------


async def test_multi_turn_request_body(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(completion({"content": "Done."}))
    request = LLMRequest(
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
    await provider.complete(request)

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
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    server.reply(completion({"content": '{"n": 1}'}))
    await provider.complete(ask("n?", model="gpt-other", output_schema=schema))
    body = server.seen[0].body
    assert body["model"] == "gpt-other"
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema},
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
    payload = completion({"content": "Hello there."})
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
    server.reply(
        completion(
            {
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
                    {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": '}},
                ],
            },
            # Some servers report "stop" even with tool calls: the calls decide.
            finish_reason="stop",
        )
    )
    response = await provider.complete(ask("weather?", tools=[WEATHER_TOOL]))
    assert response.stop_reason == "tool_use"
    assert response.content == [
        ToolUseBlock("call_1", "get_weather", {"city": "Oslo"}),
        ToolUseBlock("call_2", "get_weather", {"_raw": '{"city": '}),
    ]


async def test_text_with_tool_call(server: FakeChatServer, provider: OpenAIProvider) -> None:
    server.reply(
        completion(
            {
                "content": "Let me look.",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            finish_reason="tool_calls",
        )
    )
    response = await provider.complete(ask())
    assert response.stop_reason == "tool_use"
    assert response.content == [TextBlock("Let me look."), ToolUseBlock("c", "f", {})]


async def test_usage_with_cached_and_reasoning_tokens(server: FakeChatServer, provider: OpenAIProvider) -> None:
    usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 300,
        "total_tokens": 1500,
        "prompt_tokens_details": {"cached_tokens": 1024},
        "completion_tokens_details": {"reasoning_tokens": 256},
    }
    server.reply(completion({"content": "ok"}, usage=usage))
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


# -- default_provider ---------------------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "NOETA_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


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
        default_provider("anthropic")
    for known in KNOWN_PROVIDERS:
        assert known in str(info.value)


def test_missing_local_packages_is_a_configuration_error(clean_env: pytest.MonkeyPatch) -> None:
    import noeta.providers.local as local

    clean_env.setattr(local, "_spec", lambda name: None)
    with pytest.raises(ConfigurationError, match=r"pip install 'noeta\[local\]'"):
        default_provider("local")
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        default_provider(None)
