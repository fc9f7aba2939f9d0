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

The transcript-to-turns mapping and usage live in :mod:`noeta.providers._anthropic_wire`, the
stream folding in :mod:`noeta.providers._anthropic_stream`.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from noeta.errors import ConfigurationError
from noeta.protocols.messages import (
    Block,
    LLMRequest,
    LLMResponse,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from noeta.providers._anthropic_stream import EventAssembler
from noeta.providers._anthropic_wire import CACHE_CONTROL, error_status, usage_of, wire_messages
from noeta.providers._base import HTTPProvider
from noeta.providers._shapes import (
    Shape,
    fallback_call_id,
    parse_arguments,
    stop_reason_for,
)
from noeta.providers.settings import ProviderSettings

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_VERSION = "2023-06-01"
SAMPLING_REMOVED_VERSION = "2026-10-21"

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    # The answer was cut because the context window filled up: a truncation like max_tokens.
    "model_context_window_exceeded": "max_tokens",
    # "refusal", "pause_turn" and anything new: the turn is over.
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

    provider_system = "anthropic"
    """``gen_ai.provider.name`` of its calls (compatible servers included)."""

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
        """``max_tokens_default`` caps an answer whose request sets no ``max_tokens`` (Anthropic
        requires one); ``anthropic_version`` is sent as the ``anthropic-version`` header."""
        super().__init__(
            name=name, timeout=timeout, http_client=http_client, base_url=base_url, model=model,
            api_key=api_key if api_key is not None else ProviderSettings().anthropic_api_key,
        )
        self.max_tokens_default = max_tokens_default
        self.anthropic_version = anthropic_version

    # -- HTTP -----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The Messages endpoint under ``base_url``."""
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

    def new_assembler(self, body: dict[str, Any]) -> EventAssembler:
        """A fresh folder of Messages stream events, for one streamed call of ``body``."""
        return EventAssembler(self, model=body["model"])

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

        body["messages"] = wire_messages(
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
        """:meth:`request_body` asking for an event stream."""
        return {**self.request_body(request), "stream": True}

    # -- response mapping -----------------------------------------------------------------------

    def parse_response(self, payload: Any) -> LLMResponse:
        """The :class:`LLMResponse` for a Messages API response body; a body without that shape
        raises :class:`~noeta.errors.ProviderResponseError` naming the field."""
        shape = Shape(self.name)
        body = shape.obj(payload, "the response body")
        if body.get("type") == "error":  # an error reported inside a 200
            raise self.in_stream_error(body, error_status(body))
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
            stop_reason=stop_reason_for(content, reported), content=content, usage=usage_of(body.get("usage")), raw=body
        )
