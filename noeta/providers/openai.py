"""OpenAI Chat Completions adapter over httpx.

Speaks the ``/chat/completions`` wire protocol, so it also drives any OpenAI-compatible server
(llama.cpp, vLLM, Ollama, gateways). HTTP, timeouts, error classification and the streaming
skeleton come from :mod:`noeta.providers._base`; a 2xx body without the Chat Completions shape
raises :class:`~noeta.errors.ProviderResponseError` (:mod:`noeta.providers._shapes`).

``stream`` sends the same body with ``"stream": true`` and ``stream_options.include_usage``, calls
``on_delta(kind, text)`` for each piece as it arrives (``"text"`` for ``delta.content``,
``"thinking"`` for ``delta.reasoning_content`` as llama.cpp/DeepSeek send it, ``"tool_use"`` for
``delta.tool_calls[].function.arguments`` pieces) and assembles the chunks into a Chat Completions
response body, which goes through :meth:`OpenAIProvider.parse_response` like a non-streamed one:
``raw`` of a streamed response is that assembled ``chat.completion`` body (the folding is
:mod:`noeta.providers._openai_stream`).
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from noeta.protocols.messages import (
    Block,
    ImageBlock,
    LLMRequest,
    LLMResponse,
    Message,
    StopReason,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from noeta.providers._base import HTTPProvider
from noeta.providers._openai_stream import ChunkAssembler
from noeta.providers._shapes import (
    Shape,
    count,
    error_text,
    fallback_call_id,
    parse_arguments,
    stop_reason_for,
    tool_result_text,
)
from noeta.providers.settings import ProviderSettings

DEFAULT_BASE_URL = "https://api.openai.com/v1"

_FINISH_REASONS: dict[str, StopReason] = {
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "stop": "end_turn",
    "length": "max_tokens",
}


class OpenAIProvider(HTTPProvider):
    """An :class:`~noeta.protocols.messages.LLMProvider` for the Chat Completions API.

    ``api_key`` defaults to ``OPENAI_API_KEY``; an empty string means "send no key" (key-less local
    servers). The key is kept out of ``repr`` and logs. ``timeout`` applies when a request carries
    no ``timeout_seconds`` of its own (the worker always sets one).
    """

    provider_system = "openai"
    """``gen_ai.provider.name`` of its calls (OpenAI-compatible servers included)."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        model: str | None = None,
        name: str = "openai",
        timeout: float = 120,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        """``base_url`` ends where ``/chat/completions`` is appended (``.../v1``); ``http_client``
        is used as given and left open, otherwise the provider pools its own."""
        super().__init__(
            name=name, timeout=timeout, http_client=http_client, base_url=base_url, model=model,
            api_key=api_key if api_key is not None else ProviderSettings().openai_api_key,
        )

    # -- HTTP -----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The Chat Completions endpoint under ``base_url``."""
        return f"{self.base_url}/chat/completions"

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    def new_assembler(self, body: dict[str, Any]) -> ChunkAssembler:
        """A fresh folder of ``chat.completion.chunk`` events, for one streamed call of ``body``."""
        return ChunkAssembler(self, body.get("model"))

    # -- request mapping ------------------------------------------------------------------------

    def request_body(self, request: LLMRequest) -> dict[str, Any]:
        """The JSON body of a Chat Completions call for ``request``."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for message in request.messages:
            messages.extend(_wire_messages(message))
        body: dict[str, Any] = {"messages": messages}
        model = request.model or self.model
        if model:  # key-less local servers ignore the model; OpenAI itself needs one
            body["model"] = model
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t["name"],
                        "description": t.get("description", ""),
                        "parameters": t.get("input_schema") or {"type": "object", "properties": {}},
                    },
                }
                for t in request.tools
            ]
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.effort is not None:
            body["reasoning_effort"] = request.effort
        if request.output_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.output_schema},
            }
        return body

    def stream_body(self, request: LLMRequest) -> dict[str, Any]:
        """The body of a streamed call: :meth:`request_body` plus the stream switches."""
        return {**self.request_body(request), "stream": True, "stream_options": {"include_usage": True}}

    # -- response mapping -----------------------------------------------------------------------

    def parse_response(self, payload: Any) -> LLMResponse:
        """The :class:`LLMResponse` for a Chat Completions response body; a body without that
        shape raises :class:`~noeta.errors.ProviderResponseError` naming the field."""
        shape = Shape(self.name)
        body = shape.obj(payload, "the response body")
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices:
            detail = error_text(body)
            if detail is not None:  # an error reported inside a 200
                raise self.in_stream_error(body, 500)
            raise shape.error("choices", "a non-empty list", choices)
        choice = shape.obj(choices[0], "choices[0]")
        message = shape.obj(choice.get("message"), "choices[0].message")
        content: list[Block] = []
        text = _message_text(shape, message.get("content"))
        if text:
            content.append(TextBlock(text=text))
        calls = shape.list_or_none(message.get("tool_calls"), "choices[0].message.tool_calls")
        for i, raw_call in enumerate(calls):
            where = f"choices[0].message.tool_calls[{i}]"
            call = shape.obj(raw_call, where)
            function = shape.obj(call.get("function"), f"{where}.function")
            content.append(
                ToolUseBlock(
                    call_id=_call_id(call.get("id")),
                    tool_name=shape.name(function.get("name"), f"{where}.function.name"),
                    arguments=parse_arguments(function.get("arguments")),
                )
            )
        finish = choice.get("finish_reason")
        reported = _FINISH_REASONS.get(finish if isinstance(finish, str) else "", "end_turn")
        return LLMResponse(
            stop_reason=stop_reason_for(content, reported),
            content=content,
            usage=_usage(body.get("usage")),
            raw=body,
        )


def _call_id(value: Any) -> str:
    # Some compatible servers omit ids; the agent loop needs a unique one to pair results.
    return value if isinstance(value, str) and value else fallback_call_id()


def _message_text(shape: Shape, content: Any) -> str:
    """``message.content``: a string, null, or (some compatible servers) a list of text parts."""
    if isinstance(content, list):
        parts = [shape.obj(p, "choices[0].message.content[]") for p in content]
        return "".join(p["text"] for p in parts if isinstance(p.get("text"), str))
    return shape.text_or_none(content, "choices[0].message.content")


def _wire_messages(message: Message) -> list[dict[str, Any]]:
    """One transcript message as Chat Completions messages (tool results become one each)."""
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    calls = [b for b in message.content if isinstance(b, ToolUseBlock)]
    # Tool results go first: the API wants them right after the assistant turn that asked for them.
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": r.call_id, "content": tool_result_text(r)}
        for r in message.content
        if isinstance(r, ToolResultBlock)
    ]
    if message.role == "assistant":
        entry: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            entry["tool_calls"] = [
                {
                    "type": "function",
                    "id": c.call_id,
                    "function": {"name": c.tool_name, "arguments": json.dumps(c.arguments)},
                }
                for c in calls
            ]
        if text or calls:
            out.append(entry)
    elif message.role != "tool":
        # "system"/"memory" origins are engine-written user turns, sent as user text.
        role = "system" if message.role == "system" else "user"
        images = [b for b in message.content if isinstance(b, ImageBlock) and b.data]
        if images and role == "user":
            parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            parts += [
                {"type": "image_url", "image_url": {"url": f"data:{i.source.media_type};base64,{i.data}"}}
                for i in images
            ]
            out.append({"role": "user", "content": parts})
        elif text:
            out.append({"role": role, "content": text})
    # Images returned by tools are not sent: Chat Completions tool messages carry text only.
    return out


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    prompt_details, completion_details = raw.get("prompt_tokens_details"), raw.get("completion_tokens_details")
    prompt = count(raw.get("prompt_tokens"))
    cached = count(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else 0
    reasoning = count(completion_details.get("reasoning_tokens")) if isinstance(completion_details, dict) else 0
    return Usage(
        uncached=max(0, prompt - cached),
        cache_read=cached,
        output=count(raw.get("completion_tokens")),
        reasoning_tokens=reasoning,
    )
