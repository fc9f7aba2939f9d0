"""The adapters' request bodies and the fake servers' replies, checked against the official SDKs.

The ``openai`` and ``anthropic`` packages (test-only dependencies) ship typed request params
(TypedDicts) and response models generated from the vendors' API specs. Every request case of
tests/test_openai_provider.py and tests/test_anthropic_provider.py is sent through the real
adapter (``complete`` and ``stream``) to the fake server, and the body the server received is
validated; every reply payload, stream chunk/event and error body those tests script is validated
against the SDKs' response models. So the fakes are proven to speak the real wire format, and
the adapters to send it.

How the request check is made strict (plain ``TypeAdapter(P).validate_python(body)`` proves
little, see the negative tests at the end):

- the SDKs type list fields as ``Iterable[...]``, which pydantic validates *lazily*: the result
  holds a ``ValidatorIterator`` and the items are only checked when it is consumed. So the result
  is consumed recursively (``_materialize``);
- a TypedDict ignores unknown keys (and ``TypeAdapter(config=...)`` cannot change that for a
  TypedDict), so the validated, materialized value must equal the body: a dropped unknown key or a
  misspelled one shows up as a difference;
- ``strict=True`` stops lax coercions (``"10"`` for an int).

Response models allow unknown fields (``model_extra``); the check also rejects those, so a fake
cannot carry a field the real API does not have.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

from anthropic.types import ErrorResponse, RawMessageStreamEvent
from anthropic.types import Message as AnthropicMessage
from anthropic.types.message_create_params import (
    MessageCreateParamsNonStreaming,
    MessageCreateParamsStreaming,
)
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)
from openai.types.shared import ErrorObject
from pydantic import BaseModel, TypeAdapter, ValidationError

from noeta.protocols.messages import LLMRequest
from noeta.providers.anthropic import AnthropicProvider
from noeta.providers.openai import OpenAIProvider
from tests import test_anthropic_provider as anthropic_cases
from tests import test_openai_provider as openai_cases
from tests.support.chat_server import (
    FakeChatServer,
    chunks_for,
    completion,
    error_body,
    running_chat_server,
)
from tests.support.messages_server import (
    FakeMessagesServer,
    anthropic_error,
    events_for,
    message,
    running_messages_server,
)

# -- validators ---------------------------------------------------------------------------------

_adapters: dict[Any, TypeAdapter[Any]] = {}


def _adapter(tp: Any) -> TypeAdapter[Any]:
    if tp not in _adapters:
        _adapters[tp] = TypeAdapter(tp)
    return _adapters[tp]


def _materialize(value: Any) -> Any:
    """Consume pydantic's lazy ``ValidatorIterator``s (validating their items) into lists."""
    if isinstance(value, dict):
        return {k: _materialize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_materialize(v) for v in value]
    if isinstance(value, Iterator):
        return [_materialize(v) for v in value]
    return value


def check_params(params_type: Any, body: dict[str, Any]) -> None:
    """Raise unless ``body`` is a valid request for the SDK TypedDict ``params_type``."""
    validated = _materialize(_adapter(params_type).validate_python(body, strict=True))
    if validated != body:
        raise AssertionError(f"keys or values the SDK does not know:\nsent: {body}\nkept: {validated}")


def _no_extras(value: Any, path: str = "$", allowed: frozenset[str] = frozenset()) -> None:
    if isinstance(value, BaseModel):
        extra = set(value.model_extra or {}) - allowed
        assert not extra, f"{path} ({type(value).__name__}) has fields the SDK does not know: {sorted(extra)}"
        for name in type(value).model_fields:
            _no_extras(getattr(value, name), f"{path}.{name}", allowed)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _no_extras(item, f"{path}[{i}]", allowed)
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_extras(item, f"{path}.{key}", allowed)


def check_model(model: type[BaseModel], payload: dict[str, Any], allowed: frozenset[str] = frozenset()) -> BaseModel:
    """Validate ``payload`` strictly; no field the SDK does not know, except ``allowed`` ones."""
    parsed = model.model_validate(payload, strict=True)
    _no_extras(parsed, allowed=allowed)
    return parsed


# Chat Completions extensions of compatible servers (llama.cpp, DeepSeek) that the adapter reads.
OPENAI_EXTENSIONS = frozenset({"reasoning_content"})


def check_event(event: dict[str, Any]) -> None:
    """An Anthropic stream event: the six typed events, plus ``ping`` and ``error`` which the SDK
    handles outside the ``RawMessageStreamEvent`` union."""
    if event["type"] == "ping":
        assert event == {"type": "ping"}
    elif event["type"] == "error":
        check_model(ErrorResponse, event)
    else:
        _no_extras(_adapter(RawMessageStreamEvent).validate_python(event, strict=True))


# -- servers ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chat() -> Iterator[FakeChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture(scope="module")
def messages() -> Iterator[FakeMessagesServer]:
    with running_messages_server() as server:
        yield server


def _ignore(kind: str, text: str) -> None:
    pass


# -- requests -----------------------------------------------------------------------------------


def check_anthropic_2023(params_type: Any, body: dict[str, Any]) -> None:
    """A body for ``anthropic-version: 2023-06-01``. The SDK 2.x types describe API version
    2026-10-21, which removed ``temperature``; 2023-06-01 still has it (a number in 0..1), so it
    is checked here and the rest against the SDK."""
    rest = dict(body)
    temperature = rest.pop("temperature", None)
    if temperature is not None:
        assert isinstance(temperature, (int, float)) and 0 <= temperature <= 1
    check_params(params_type, rest)


@pytest.mark.parametrize("version", ["2023-06-01", "2026-10-21"])
@pytest.mark.parametrize("case", sorted(anthropic_cases.REQUESTS))
async def test_anthropic_request_bodies(messages: FakeMessagesServer, case: str, version: str) -> None:
    messages.seen.clear()
    request: LLMRequest = anthropic_cases.REQUESTS[case]
    provider = AnthropicProvider(
        base_url=messages.base_url, api_key="k", model="claude-test", anthropic_version=version
    )
    messages.reply(anthropic_cases.RESPONSES["text"])
    messages.reply(anthropic_cases.STREAMS["text"])
    await provider.complete(request)
    await provider.stream(request, _ignore)
    plain, streamed = (seen.body for seen in messages.seen)
    assert messages.seen[0].headers["anthropic-version"] == version
    if version == "2023-06-01":
        check_anthropic_2023(MessageCreateParamsNonStreaming, plain)
        check_anthropic_2023(MessageCreateParamsStreaming, streamed)
    else:  # what the SDK types describe, exactly
        assert "temperature" not in plain
        check_params(MessageCreateParamsNonStreaming, plain)
        check_params(MessageCreateParamsStreaming, streamed)


@pytest.mark.parametrize("case", sorted(openai_cases.REQUESTS))
async def test_openai_request_bodies(chat: FakeChatServer, case: str) -> None:
    chat.seen.clear()
    request: LLMRequest = openai_cases.REQUESTS[case]
    # With a model: OpenAI requires one (key-less local servers get bodies without it on purpose).
    provider = OpenAIProvider(base_url=chat.base_url, api_key="k", model="gpt-test")
    chat.reply(openai_cases.RESPONSES["text"])
    chat.reply(openai_cases.STREAMS["text"])
    await provider.complete(request)
    await provider.stream(request, _ignore)
    plain, streamed = (seen.body for seen in chat.seen)
    check_params(CompletionCreateParamsNonStreaming, plain)
    check_params(CompletionCreateParamsStreaming, streamed)


def test_openai_tool_request_with_tools() -> None:
    # The multi-turn case carries tools; check the tool-definition shape on its own too.
    body = OpenAIProvider(api_key="", model="m").request_body(
        LLMRequest(model=None, messages=openai_cases.MULTI_TURN.messages, tools=[openai_cases.WEATHER_TOOL])
    )
    check_params(CompletionCreateParamsNonStreaming, body)


# -- responses ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(anthropic_cases.RESPONSES))
def test_anthropic_responses(case: str) -> None:
    check_model(AnthropicMessage, anthropic_cases.RESPONSES[case])


@pytest.mark.parametrize("case", sorted(anthropic_cases.STREAMS))
async def test_anthropic_stream_events(messages: FakeMessagesServer, case: str) -> None:
    for event in anthropic_cases.STREAMS[case]:
        check_event(event)
    if case in anthropic_cases.RESPONSES:
        # The message a stream assembles into is a valid Message too.
        messages.reply(anthropic_cases.STREAMS[case])
        provider = AnthropicProvider(base_url=messages.base_url, api_key="", model="claude-test")
        response = await provider.stream(LLMRequest(model=None, messages=[]), _ignore)
        assert response.raw is not None
        check_model(AnthropicMessage, response.raw)


@pytest.mark.parametrize("case", sorted(anthropic_cases.ERRORS))
def test_anthropic_error_bodies(case: str) -> None:
    check_model(ErrorResponse, anthropic_cases.ERRORS[case])


@pytest.mark.parametrize("case", sorted(openai_cases.RESPONSES))
def test_openai_responses(case: str) -> None:
    check_model(ChatCompletion, openai_cases.RESPONSES[case])


@pytest.mark.parametrize("case", sorted(openai_cases.STREAMS))
async def test_openai_stream_chunks(chat: FakeChatServer, case: str) -> None:
    allowed = OPENAI_EXTENSIONS if case == "reasoning" else frozenset()
    for chunk in openai_cases.STREAMS[case]:
        check_model(ChatCompletionChunk, chunk, allowed)
    chat.reply(openai_cases.STREAMS[case])
    provider = OpenAIProvider(base_url=chat.base_url, api_key="", model="gpt-test")
    response = await provider.stream(LLMRequest(model=None, messages=[]), _ignore)
    assert response.raw is not None
    # The body a stream assembles into is a valid chat.completion too.
    check_model(ChatCompletion, response.raw, allowed)


def test_openai_error_body() -> None:
    check_model(ErrorObject, error_body("Rate limit reached")["error"])
    check_model(ErrorObject, error_body("too long", code="context_length_exceeded")["error"])


def test_builders_for_every_finish_and_stop_reason() -> None:
    for reason in ("stop", "length", "tool_calls", "content_filter"):
        check_model(ChatCompletion, completion({"content": "x"}, finish_reason=reason))
        for chunk in chunks_for(completion({"content": "x"}, finish_reason=reason)):
            check_model(ChatCompletionChunk, chunk)
    for reason in ("end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"):
        payload = message([{"type": "text", "text": "x"}], stop_reason=reason)
        check_model(AnthropicMessage, payload)
        for event in events_for(payload):
            check_event(event)
    check_model(ErrorResponse, anthropic_error("Overloaded", "overloaded_error"))


# -- the checks reject wrong bodies -------------------------------------------------------------

GOOD_ANTHROPIC = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}

BAD_ANTHROPIC = {
    # A tool result in OpenAI's shape: role "tool" does not exist in the Messages API.
    "openai_tool_role": {**GOOD_ANTHROPIC, "messages": [{"role": "tool", "tool_call_id": "a", "content": "x"}]},
    # A misspelled key inside a nested content block.
    "misspelled_block_key": {
        **GOOD_ANTHROPIC,
        "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_idx": "a", "content": "x"}]}],
    },
    # An unknown top-level key.
    "unknown_top_level_key": {**GOOD_ANTHROPIC, "response_format": {"type": "json_object"}},
    # A string where an int belongs.
    "coerced_int": {**GOOD_ANTHROPIC, "max_tokens": "10"},
}

BAD_OPENAI = {
    # Arguments as an object instead of a JSON string.
    "arguments_not_a_string": {
        "model": "m",
        "messages": [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"type": "function", "id": "c", "function": {"name": "f", "arguments": {"a": 1}}}],
            }
        ],
    },
    # An Anthropic tool_result block in an OpenAI message.
    "anthropic_block": {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x"}]}],
    },
    "unknown_top_level_key": {"model": "m", "messages": [], "max_tokenz": 5},
}


def test_valid_bodies_pass() -> None:
    check_params(MessageCreateParamsNonStreaming, GOOD_ANTHROPIC)
    check_params(CompletionCreateParamsNonStreaming, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})


@pytest.mark.parametrize("case", sorted(BAD_ANTHROPIC))
def test_wrong_anthropic_bodies_are_rejected(case: str) -> None:
    body = BAD_ANTHROPIC[case]
    # The naive check lets every one of them through...
    TypeAdapter(MessageCreateParamsNonStreaming).validate_python(body)
    # ...the strict one does not.
    with pytest.raises((ValidationError, AssertionError)):
        check_params(MessageCreateParamsNonStreaming, body)


@pytest.mark.parametrize("case", sorted(BAD_OPENAI))
def test_wrong_openai_bodies_are_rejected(case: str) -> None:
    body = BAD_OPENAI[case]
    TypeAdapter(CompletionCreateParamsNonStreaming).validate_python(body)  # naive: passes
    with pytest.raises((ValidationError, AssertionError)):
        check_params(CompletionCreateParamsNonStreaming, body)


def test_wrong_responses_are_rejected() -> None:
    misspelled = message([{"type": "text", "text": "x"}])
    misspelled["stop_reasn"] = misspelled.pop("stop_reason")
    AnthropicMessage.model_validate(misspelled)  # the SDK model alone accepts it (as an extra)
    with pytest.raises(AssertionError, match="stop_reasn"):
        check_model(AnthropicMessage, misspelled)
    # A null finish_reason (sent by some compatible servers) is not OpenAI's wire format.
    with pytest.raises(ValidationError):
        check_model(ChatCompletion, openai_cases.OFF_SPEC_RESPONSES["null_finish_reason"])
    with pytest.raises(ValidationError):
        check_event({"type": "content_block_delta", "index": 0, "delta": {"type": "text", "text": "x"}})
