"""OpenAI Chat Completions adapter over httpx.

Speaks the ``/chat/completions`` wire protocol, so it also drives any OpenAI-compatible server
(llama.cpp, vLLM, Ollama, gateways). Error responses become typed :class:`ProviderError` through
:func:`noeta.providers.errors.error_from_response`; transport errors (connection refused, timeouts)
propagate unchanged so the activity's classifier marks them retryable.

``stream`` sends the same body with ``"stream": true`` and ``stream_options.include_usage``, calls
``on_delta(kind, text)`` for each piece as it arrives (``"text"`` for ``delta.content``,
``"thinking"`` for ``delta.reasoning_content`` as llama.cpp/DeepSeek send it, ``"tool_use"`` for
``delta.tool_calls[].function.arguments`` pieces) and assembles the chunks into a Chat Completions
response body, which goes through :meth:`OpenAIProvider.parse_response` like a non-streamed one:
``raw`` of a streamed response is that assembled ``chat.completion`` body.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from typing import Any

import httpx

from noeta.errors import ProviderError
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
from noeta.providers._sse import DONE, OnDelta, aiter_events, emit
from noeta.providers.errors import error_from_response
from noeta.security.scrub import register_secret

DEFAULT_BASE_URL = "https://api.openai.com/v1"

_FINISH_REASONS: dict[str, StopReason] = {
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "stop": "end_turn",
    "length": "max_tokens",
}


class HTTPProvider:
    """Shared plumbing of the httpx adapters: a pooled client per event loop, or one passed in."""

    name: str
    timeout: float

    def _init_http(self, timeout: float, http_client: httpx.AsyncClient | None) -> None:
        self.timeout = timeout
        self._external_client = http_client
        # A pooled client is bound to the event loop it was first used on; remember which one so a
        # provider shared across loops (tests, sync wrappers) gets a fresh client instead of failing.
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._external_client is not None:
            return self._external_client
        loop = asyncio.get_running_loop()
        if self._client is None or self._client.is_closed or self._client_loop is not loop:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout))
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the pooled client this provider created (a client passed in is left open)."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def _post_json(self, url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
        """POST ``body``; the decoded JSON of a 2xx answer, a typed error otherwise."""
        response = await self._http().post(url, json=body, headers=headers)
        if response.status_code >= 400:
            raise error_from_response(
                self.name, response.status_code, response.headers, _error_message(response)
            )
        try:
            return response.json()
        except ValueError:
            # A 2xx with a cut or non-JSON body is usually a proxy hiccup: worth another attempt.
            raise ProviderError(
                provider=self.name,
                message=f"response is not JSON: {response.text[:500]!r}",
                status=response.status_code,
                retryable=True,
            ) from None

    async def _raise_for_stream_status(self, response: httpx.Response) -> None:
        """The typed error of a streaming call that failed before its stream began."""
        if response.status_code >= 400:
            await response.aread()
            raise error_from_response(
                self.name, response.status_code, response.headers, _error_message(response)
            )

    def parse_response(self, payload: Any) -> LLMResponse:
        raise NotImplementedError

    async def _unstreamed(self, response: httpx.Response, on_delta: OnDelta) -> LLMResponse:
        """A 2xx JSON answer to a streamed call (a server that ignores ``"stream"``): parsed as
        a whole, its text delivered as one delta."""
        await response.aread()
        try:
            payload = response.json()
        except ValueError:
            raise self._stream_cut(f"non-JSON body {response.text[:200]!r}") from None
        result = self.parse_response(payload)
        await emit(on_delta, "text", result.text)
        return result

    def _stream_cut(self, detail: str) -> ProviderError:
        # The connection closed cleanly but the stream never said it was complete: a proxy or
        # server hiccup, worth another attempt.
        return ProviderError(
            provider=self.name, message=f"stream ended early: {detail}", retryable=True
        )


class OpenAIProvider(HTTPProvider):
    """An :class:`~noeta.protocols.messages.LLMProvider` for the Chat Completions API.

    ``api_key`` defaults to ``OPENAI_API_KEY``; an empty string means "send no key" (key-less local
    servers). The key is kept out of ``repr`` and logs.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        model: str | None = None,
        name: str = "openai",
        timeout: float = 120,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = name
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        register_secret(self._api_key)  # scrubbed from errors and logs wherever it is echoed
        self._init_http(timeout, http_client)

    def __repr__(self) -> str:
        return f"OpenAIProvider(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r})"

    # -- HTTP -----------------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    async def complete(self, request: LLMRequest) -> LLMResponse:
        payload = await self._post_json(
            f"{self.base_url}/chat/completions", self.request_body(request), self._headers()
        )
        return self.parse_response(payload)

    async def stream(self, request: LLMRequest, on_delta: OnDelta) -> LLMResponse:
        """Like :meth:`complete`, over SSE, calling ``on_delta(kind, text)`` for each piece.

        Cancelling the awaiting task closes the HTTP stream (and so the server's generation).
        """
        body = self.stream_body(request)
        headers = {**self._headers(), "accept": "text/event-stream"}
        assembler = _ChunkAssembler()
        async with self._http().stream(
            "POST", f"{self.base_url}/chat/completions", json=body, headers=headers
        ) as response:
            await self._raise_for_stream_status(response)
            if _is_json(response):  # a compatible server that ignores "stream": one whole body
                return await self._unstreamed(response, on_delta)
            async for event in aiter_events(response):
                if event.data == DONE:
                    assembler.done = True
                    break
                try:
                    chunk = json.loads(event.data)
                except ValueError:
                    raise ProviderError(
                        provider=self.name,
                        message=f"stream chunk is not JSON: {event.data[:500]!r}",
                        retryable=True,
                    ) from None
                if not isinstance(chunk, dict):
                    continue
                if chunk.get("error") is not None:  # an error reported mid-stream
                    raise self._stream_error(chunk)
                for kind, text in assembler.add(chunk):
                    await emit(on_delta, kind, text)
        if not assembler.done and assembler.finish_reason is None:
            raise self._stream_cut("no finish_reason and no [DONE]")
        return self.parse_response(assembler.payload(body.get("model")))

    def _stream_error(self, chunk: dict[str, Any]) -> ProviderError:
        error = chunk.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        # Without an HTTP status to go by, an error inside a 200 stream counts as a server error.
        status = code if isinstance(code, int) and code >= 400 else 500
        return error_from_response(self.name, status, {}, _error_text(chunk) or str(chunk)[:500])

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

    def parse_response(self, payload: dict[str, Any]) -> LLMResponse:
        """The :class:`LLMResponse` for a Chat Completions response body."""
        choices = payload.get("choices") if isinstance(payload, dict) else None
        if not choices:
            raise ProviderError(
                provider=self.name,
                message=f"response has no choices: {_error_text(payload) or str(payload)[:500]}",
                retryable=False,
            )
        choice = choices[0]
        message = choice.get("message") or {}
        content: list[Block] = []
        text = message.get("content")
        if isinstance(text, str) and text:
            content.append(TextBlock(text=text))
        for i, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function") or {}
            content.append(
                ToolUseBlock(
                    # Some compatible servers omit ids; the agent loop needs a unique one to pair results.
                    call_id=call.get("id") or fallback_call_id(),
                    tool_name=function.get("name", ""),
                    arguments=_parse_arguments(function.get("arguments")),
                )
            )
        return LLMResponse(
            stop_reason=_stop_reason(content, _FINISH_REASONS.get(choice.get("finish_reason") or "", "end_turn")),
            content=content,
            usage=_usage(payload.get("usage")),
            raw=payload,
        )


class _ChunkAssembler:
    """Folds ``chat.completion.chunk`` objects into one ``chat.completion`` body."""

    def __init__(self) -> None:
        self.id = ""
        self.model = ""
        self.created = 0
        self.system_fingerprint: str | None = None
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}  # by the chunk's tool_calls[].index
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False

    def add(self, chunk: dict[str, Any]) -> list[tuple[str, str]]:
        """Fold one chunk in; return the (kind, text) deltas it carried, in order."""
        self.id = chunk.get("id") or self.id
        self.model = chunk.get("model") or self.model
        self.created = chunk.get("created") or self.created
        self.system_fingerprint = chunk.get("system_fingerprint") or self.system_fingerprint
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        deltas: list[tuple[str, str]] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue  # n > 1 is never requested
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.reasoning.append(reasoning)
                deltas.append(("thinking", reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.text.append(content)
                deltas.append(("text", content))
            if isinstance(delta.get("refusal"), str):
                self.refusal.append(delta["refusal"])
            for position, piece in enumerate(delta.get("tool_calls") or []):
                index = piece.get("index", position)
                call = self.calls.setdefault(
                    index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                if piece.get("id"):
                    call["id"] = piece["id"]
                function = piece.get("function") or {}
                if function.get("name"):
                    call["function"]["name"] += function["name"]
                arguments = function.get("arguments")
                if isinstance(arguments, str) and arguments:
                    call["function"]["arguments"] += arguments
                    deltas.append(("tool_use", arguments))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return deltas

    def payload(self, model: str | None) -> dict[str, Any]:
        """The assembled body, shaped like a non-streamed Chat Completions response."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [
                {**call, "id": call["id"] or fallback_call_id()}
                for i, (_, call) in enumerate(sorted(self.calls.items()))
            ]
        payload: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created or int(time.time()),
            "model": self.model or model or "",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
        }
        if self.system_fingerprint:
            payload["system_fingerprint"] = self.system_fingerprint
        if self.usage is not None:
            payload["usage"] = self.usage
        return payload


def _wire_messages(message: Message) -> list[dict[str, Any]]:
    """One transcript message as Chat Completions messages (tool results become one each)."""
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    calls = [b for b in message.content if isinstance(b, ToolUseBlock)]
    # Tool results go first: the API wants them right after the assistant turn that asked for them.
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": r.call_id, "content": _result_text(r)}
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


def _result_text(result: ToolResultBlock) -> str:
    if isinstance(result.output, str) and result.output:
        return result.output
    return result.error or (result.output if isinstance(result.output, str) else "")


def fallback_call_id() -> str:
    """A unique id for a tool call the server sent without one (ids must not repeat in a task)."""
    return f"call_{uuid.uuid4().hex[:16]}"


def _stop_reason(content: list[Block], reported: StopReason) -> StopReason:
    """Tool calls in the answer decide: some servers report "stop" with tool calls, or claim tool
    calls and send none."""
    if any(isinstance(b, ToolUseBlock) for b in content):
        return "tool_use"
    return "end_turn" if reported == "tool_use" else reported


def _parse_arguments(arguments: Any) -> dict[str, Any]:
    """Tool arguments as a dict; malformed JSON is kept as ``{"_raw": text}`` for the agent loop
    to report back to the model instead of failing the call."""
    if isinstance(arguments, dict):
        return arguments
    if arguments is None or arguments == "":
        return {}
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    try:
        parsed = json.loads(text)
    except ValueError:
        return {"_raw": text}
    return parsed if isinstance(parsed, dict) else {"_raw": text}


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    prompt = int(raw.get("prompt_tokens") or 0)
    cached = int((raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    reasoning = int((raw.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    return Usage(
        uncached=max(0, prompt - cached),
        cache_read=cached,
        output=int(raw.get("completion_tokens") or 0),
        reasoning_tokens=reasoning,
    )


def _error_text(payload: Any) -> str | None:
    """The message of an OpenAI-style error body: ``{"error": {"message": ...}}`` and variants."""
    if not isinstance(payload, dict):
        return None
    error = payload.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    if isinstance(error, str):
        return error
    message = payload.get("message")
    return message if isinstance(message, str) else None


def _is_json(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").split(";")[0].strip() == "application/json"


def _error_message(response: httpx.Response) -> str:
    try:
        message = _error_text(response.json())
    except ValueError:
        message = None
    return message or response.text[:2000] or response.reason_phrase or "error"
