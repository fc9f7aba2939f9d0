"""Anthropic Messages API adapter over httpx (``POST {base_url}/v1/messages``).

Also drives Messages-compatible servers: llama.cpp's server (and so the embedded local model)
answers ``/v1/messages`` too. Errors go through :func:`noeta.providers.errors.error_from_response`
like the OpenAI adapter's: 429 and 5xx (Anthropic's 529 ``overloaded_error`` included) are
retryable, other 4xx are not, and a 400 "prompt is too long" is a :class:`ContextLengthError`.

Request mapping (see :meth:`AnthropicProvider.request_body`):

- ``system`` becomes the top-level ``system`` as one text block.
- Messages: text -> ``text`` blocks; an assistant :class:`ToolUseBlock` -> ``tool_use``; each
  :class:`ToolResultBlock` (role ``"tool"`` messages) -> a ``tool_result`` block in a **user**
  turn (``is_error = not success``). Anthropic wants user and assistant turns to alternate, so
  consecutive turns of the same role are merged into one (e.g. a tool-result turn followed by an
  engine-injected user message). A transcript message of role ``"system"`` is sent as user text
  (the Messages API has no system role inside ``messages``). Empty text is dropped (the API
  rejects empty text blocks).
- Images: the worker fills :class:`ImageBlock` ``data`` (base64) from the content store before the
  call; they go as ``image`` blocks with a base64 source, in user turns and inside ``tool_result``.
- Prompt caching: ``cache_control: {"type": "ephemeral"}`` goes on the system block and on the
  last tool definition, so the stable prefix (tools, then system, in Anthropic's cache order) is
  cached from one turn to the next. ``request.metadata["cache_breakpoint_message"] = i`` (an index
  into ``request.messages``, negative allowed) also marks the last block sent for that message, so
  the transcript up to there is cached too. At most three breakpoints are used (the API allows 4).
- ``temperature`` is sent under the default ``anthropic-version: 2023-06-01`` (some newer models
  still reject it there: "temperature is deprecated for this model"); never from API version
  ``2026-10-21`` on, which removed the sampling parameters (the ``anthropic`` SDK 2.x sends that
  version and has no ``temperature`` at all).
- ``thinking`` passes through unchanged (``{"type": "enabled", "budget_tokens": N}`` or, on newer
  models, ``{"type": "adaptive"}``). When it is on, ``temperature`` is not sent (the API rejects
  the combination) and a missing ``max_tokens`` defaults to ``budget_tokens + max_tokens_default``
  (``max_tokens`` must exceed the thinking budget). The API wants the thinking blocks (with their
  signatures) of an assistant turn sent back with its tool results: they are kept in the transcript
  as :class:`ThinkingBlock` and sent first in that assistant turn (``thinking`` with its signature,
  or ``redacted_thinking``); an unsigned one is not sent.
- ``max_tokens`` is required by the API: ``max_tokens_default`` when the request has none.
- ``output_schema``: this adapter does not use a native JSON mode; it appends an instruction to
  the system prompt to answer with JSON matching the schema. The agent loop's validation still
  checks the answer.
- ``effort`` goes as ``output_config: {"effort": ...}`` (``none`` and ``minimal``, which only
  OpenAI knows, as ``low``).

Response mapping: ``text`` -> :class:`TextBlock`, ``tool_use`` -> :class:`ToolUseBlock`,
``thinking`` / ``redacted_thinking`` -> :class:`ThinkingBlock`; thinking tokens, where the API reports
``usage.output_tokens_details.thinking_tokens``, land in ``Usage.reasoning_tokens``. Usage:
``input_tokens`` -> ``uncached``, ``cache_read_input_tokens`` -> ``cache_read``,
``cache_creation_input_tokens`` -> ``cache_write``, ``output_tokens`` -> ``output``.

``stream`` sends the same body with ``"stream": true``; ``on_delta`` gets ``text_delta`` pieces as
``"text"``, ``thinking_delta`` as ``"thinking"`` and ``input_json_delta`` as ``"tool_use"``. The
events are folded back into a Messages response body (``raw``), parsed like a non-streamed one.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from noeta.errors import ConfigurationError
from noeta.protocols.messages import (
    Block,
    ImageBlock,
    LLMRequest,
    LLMResponse,
    Message,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from noeta.providers._sse import OnDelta, ServerSentEvent
from noeta.providers.base import HTTPProvider
from noeta.providers.shapes import (
    Shape,
    count,
    fallback_call_id,
    parse_arguments,
    stop_reason_for,
    tool_result_text,
)
from noeta.security.scrub import register_secret

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_VERSION = "2023-06-01"
SAMPLING_REMOVED_VERSION = "2026-10-21"
CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    # The answer was cut because the context window filled up: a truncation like max_tokens.
    "model_context_window_exceeded": "max_tokens",
    # "refusal", "pause_turn" and anything new: the turn is over.
}

# The HTTP status each error type of an in-stream ``error`` event stands for.
_ERROR_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

#: Efforts only OpenAI knows, as the nearest one Anthropic accepts.
_EFFORT = {"none": "low", "minimal": "low"}

JSON_INSTRUCTION = (
    "Answer with a single JSON value that matches this JSON Schema, and nothing else "
    "(no prose, no code fences):\n"
)


class AnthropicProvider(HTTPProvider):
    """An :class:`~noeta.protocols.messages.LLMProvider` for the Anthropic Messages API.

    ``api_key`` defaults to ``ANTHROPIC_API_KEY``; an empty string means "send no key" (key-less
    compatible servers such as llama.cpp). The key is kept out of ``repr`` and logs.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        model: str | None = None,
        name: str = "anthropic",
        timeout: float = 120,
        max_tokens_default: int = 4096,
        http_client: httpx.AsyncClient | None = None,
        anthropic_version: str = DEFAULT_VERSION,
    ) -> None:
        super().__init__(name=name, timeout=timeout, http_client=http_client)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.max_tokens_default = max_tokens_default
        self.anthropic_version = anthropic_version
        self._api_key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        register_secret(self._api_key)  # scrubbed from errors and logs wherever it is echoed

    def __repr__(self) -> str:
        return (
            f"AnthropicProvider(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r})"
        )

    # -- HTTP -----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{self.base_url}/v1/messages"

    def _headers(self) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "anthropic-version": self.anthropic_version,
        }
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return await self.post_json(self.url, self.request_body(request), self._headers(), request)

    async def stream(self, request: LLMRequest, on_delta: OnDelta) -> LLMResponse:
        """Like :meth:`complete`, over SSE, calling ``on_delta(kind, text)`` for each piece.

        Cancelling the awaiting task closes the HTTP stream (and so the server's generation).
        """
        return await self.stream_sse(self.url, self.stream_body(request), self._headers(), request, on_delta)

    def new_assembler(self, body: dict[str, Any]) -> _EventAssembler:
        return _EventAssembler(self, model=body["model"])

    # -- request mapping ------------------------------------------------------------------------

    def request_body(self, request: LLMRequest) -> dict[str, Any]:
        """The JSON body of a Messages API call for ``request``."""
        model = request.model or self.model
        if not model:
            raise ConfigurationError(
                f"provider {self.name!r} needs a model: set AnthropicProvider(model=...) or "
                "LLMRequest.model"
            )
        thinking = request.thinking or {}
        thinking_on = bool(thinking) and thinking.get("type") != "disabled"
        max_tokens = request.max_tokens
        if max_tokens is None:
            max_tokens = self.max_tokens_default
            budget = thinking.get("budget_tokens")
            if thinking_on and isinstance(budget, int):
                max_tokens += budget
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}

        system = request.system or ""
        if request.output_schema is not None:
            instruction = JSON_INSTRUCTION + json.dumps(request.output_schema, sort_keys=True)
            system = f"{system}\n\n{instruction}" if system else instruction
        if system:
            body["system"] = [{"type": "text", "text": system, "cache_control": dict(CACHE_CONTROL)}]

        body["messages"] = _wire_messages(
            request.messages, request.metadata.get("cache_breakpoint_message")
        )
        if request.tools:
            tools = [
                {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "input_schema": t.get("input_schema") or {"type": "object", "properties": {}},
                }
                for t in request.tools
            ]
            tools[-1]["cache_control"] = dict(CACHE_CONTROL)
            body["tools"] = tools
        if request.thinking is not None:
            body["thinking"] = request.thinking
        if request.effort is not None:
            body["output_config"] = {"effort": _EFFORT.get(request.effort, request.effort)}
        if request.temperature is not None and not thinking_on and self._accepts_sampling():
            body["temperature"] = request.temperature
        return body

    def _accepts_sampling(self) -> bool:
        # API version 2026-10-21 removed temperature/top_p/top_k (a 400 even at default values).
        return self.anthropic_version < SAMPLING_REMOVED_VERSION

    def stream_body(self, request: LLMRequest) -> dict[str, Any]:
        return {**self.request_body(request), "stream": True}

    # -- response mapping -----------------------------------------------------------------------

    def parse_response(self, payload: Any) -> LLMResponse:
        """The :class:`LLMResponse` for a Messages API response body; a body without that shape
        raises :class:`~noeta.errors.ProviderResponseError` naming the field."""
        shape = Shape(self.name)
        body = shape.obj(payload, "the response body")
        if body.get("type") == "error":  # an error reported inside a 200
            raise self.in_stream_error(body, _error_status(body))
        blocks = body.get("content")
        if not isinstance(blocks, list):
            raise shape.error("content", "a list of blocks", blocks)
        content: list[Block] = []
        for i, raw_block in enumerate(blocks):
            block = shape.obj(raw_block, f"content[{i}]")
            kind = block.get("type")
            if kind == "text":
                text = shape.text_or_none(block.get("text"), f"content[{i}].text")
                if text:
                    content.append(TextBlock(text=text))
            elif kind == "tool_use":
                call_id = block.get("id")
                content.append(
                    ToolUseBlock(
                        call_id=call_id if isinstance(call_id, str) and call_id else fallback_call_id(),
                        tool_name=shape.name(block.get("name"), f"content[{i}].name"),
                        arguments=parse_arguments(block.get("input")),
                    )
                )
            elif kind == "thinking" and isinstance(block.get("signature"), str) and block["signature"]:
                thinking = shape.text_or_none(block.get("thinking"), f"content[{i}].thinking")
                content.append(ThinkingBlock(thinking=thinking, signature=block["signature"]))
            elif kind == "redacted_thinking" and isinstance(block.get("data"), str) and block["data"]:
                content.append(ThinkingBlock(redacted=block["data"]))
            # Server-tool blocks are not part of the answer.
        stop = body.get("stop_reason")
        reported = _STOP_REASONS.get(stop if isinstance(stop, str) else "", "end_turn")
        return LLMResponse(
            stop_reason=stop_reason_for(content, reported), content=content, usage=_usage(body.get("usage")), raw=body
        )


def _error_status(data: dict[str, Any]) -> int:
    """The HTTP status an ``error`` object inside a 200 (body or stream event) stands for."""
    error = data.get("error")
    kind = error.get("type") if isinstance(error, dict) else None
    return _ERROR_STATUS.get(kind if isinstance(kind, str) else "", 500)


# -- helpers ------------------------------------------------------------------------------------


def _wire_messages(messages: list[Message], breakpoint: Any = None) -> list[dict[str, Any]]:
    """The transcript as Messages API turns: alternating roles, tool results in user turns."""
    out: list[dict[str, Any]] = []
    # For each transcript message, where its last block went: (turn index, block index).
    last_block: list[tuple[int, int] | None] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": list(blocks)})

    for message in messages:
        results = [
            _tool_result(b) for b in message.content if isinstance(b, ToolResultBlock)
        ]
        add("user", results)  # results answer the previous assistant turn: they go first
        blocks: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextBlock) and block.text:
                blocks.append({"type": "text", "text": block.text})
            elif isinstance(block, ToolUseBlock) and message.role == "assistant":
                blocks.append(
                    {"type": "tool_use", "id": block.call_id, "name": block.tool_name, "input": block.arguments}
                )
            elif isinstance(block, ImageBlock) and block.data and message.role != "assistant":
                blocks.append(_image(block))
            elif isinstance(block, ThinkingBlock) and message.role == "assistant":
                if block.redacted:
                    blocks.append({"type": "redacted_thinking", "data": block.redacted})
                elif block.signature:
                    blocks.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
        add("assistant" if message.role == "assistant" else "user", blocks)
        last_block.append((len(out) - 1, len(out[-1]["content"]) - 1) if (results or blocks) else None)

    where = (
        last_block[breakpoint]
        if isinstance(breakpoint, int)
        and not isinstance(breakpoint, bool)
        and -len(messages) <= breakpoint < len(messages)
        else None
    )
    if where is not None:
        turn, index = where
        content = out[turn]["content"]
        content[index] = {**content[index], "cache_control": dict(CACHE_CONTROL)}
    return out


def _image(block: ImageBlock) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": block.source.media_type, "data": block.data}}


def _tool_result(result: ToolResultBlock) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call_id}
    text = tool_result_text(result)
    if not text and not result.success:
        text = "error"  # the API rejects an empty error result
    images = [_image(i) for i in result.images or () if i.data]
    if images:
        block["content"] = ([{"type": "text", "text": text}] if text else []) + images
    elif text:
        block["content"] = text
    block["is_error"] = not result.success
    return block


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    details = raw.get("output_tokens_details")
    return Usage(
        uncached=count(raw.get("input_tokens")),
        cache_read=count(raw.get("cache_read_input_tokens")),
        cache_write=count(raw.get("cache_creation_input_tokens")),
        output=count(raw.get("output_tokens")),
        reasoning_tokens=count(details.get("thinking_tokens")) if isinstance(details, dict) else 0,
    )


class _EventAssembler:
    """Folds Messages stream events into one Messages response body."""

    def __init__(self, provider: AnthropicProvider, model: str) -> None:
        self.provider = provider
        # Start from a skeleton, so a stream without message_start (a lax compatible server) still
        # assembles into a complete message.
        self.message: dict[str, Any] = {
            "id": "",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial_json: dict[int, str] = {}
        self.stopped = False

    @property
    def ended(self) -> bool:
        return self.stopped

    @property
    def complete(self) -> bool:
        return self.stopped

    def feed(self, event: ServerSentEvent) -> list[tuple[str, str]]:
        data = self.provider.event_json(event)
        if not isinstance(data, dict):
            return []
        kind = data.get("type") or event.event
        if kind == "error":
            raise self.provider.in_stream_error(data, _error_status(data))
        try:
            return self.add(kind, data)
        except (AttributeError, TypeError) as err:  # a field of the wrong type inside an event
            raise Shape(self.provider.name).error(f"{kind} event", f"a Messages stream event ({err})", data) from None

    def add(self, kind: str | None, data: dict[str, Any]) -> list[tuple[str, str]]:
        if kind == "message_start":
            start = data.get("message") or {}
            self.message.update({k: v for k, v in start.items() if k not in ("content", "usage")})
            self.message["content"] = []
            self._usage(start.get("usage"))
        elif kind == "content_block_start":
            block = dict(data.get("content_block") or {})
            index = data.get("index", len(self.blocks))
            if block.get("type") in ("tool_use", "server_tool_use"):
                self.partial_json[index] = ""
            self.blocks[index] = block
        elif kind == "content_block_delta":
            return self._delta(data.get("index", 0), data.get("delta") or {})
        elif kind == "content_block_stop":
            self._finish_block(data.get("index", 0))
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            for key in ("stop_reason", "stop_sequence"):
                if key in delta:
                    self.message[key] = delta[key]
            self._usage(data.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        # "ping" and unknown events carry nothing to fold.
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[tuple[str, str]]:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text") or ""
            block["text"] = (block.get("text") or "") + text
            return [("text", text)]
        if kind == "thinking_delta":
            text = delta.get("thinking") or ""
            block["thinking"] = (block.get("thinking") or "") + text
            return [("thinking", text)]
        if kind == "input_json_delta":
            text = delta.get("partial_json") or ""
            self.partial_json[index] = self.partial_json.get(index, "") + text
            return [("tool_use", text)]
        if kind == "signature_delta":
            block["signature"] = (block.get("signature") or "") + (delta.get("signature") or "")
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))
        return []

    def _finish_block(self, index: int) -> None:
        block = self.blocks.get(index)
        if block is not None and index in self.partial_json:
            text = self.partial_json.pop(index)
            block["input"] = parse_arguments(text) if text else (block.get("input") or {})

    def _usage(self, usage: Any) -> None:
        # message_start carries the input side; message_delta the cumulative totals so far.
        if isinstance(usage, dict):
            self.message["usage"].update({k: v for k, v in usage.items() if v is not None})

    def payload(self) -> dict[str, Any]:
        for index in list(self.partial_json):  # a block the stream never closed
            self._finish_block(index)
        self.message["content"] = [self.blocks[i] for i in sorted(self.blocks)]
        return self.message
