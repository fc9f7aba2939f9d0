"""OpenAI Chat Completions adapter over httpx.

Speaks the ``/chat/completions`` wire protocol, so it also drives any OpenAI-compatible server
(llama.cpp, vLLM, Ollama, gateways). Error responses become typed :class:`ProviderError` through
:func:`noeta.providers.errors.error_from_response`; transport errors (connection refused, timeouts)
propagate unchanged so the activity's classifier marks them retryable.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import httpx

from noeta.errors import ProviderError
from noeta.protocols.messages import (
    Block,
    LLMRequest,
    LLMResponse,
    Message,
    StopReason,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from noeta.providers.errors import error_from_response

DEFAULT_BASE_URL = "https://api.openai.com/v1"

_FINISH_REASONS: dict[str, StopReason] = {
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "stop": "end_turn",
    "length": "max_tokens",
}


class OpenAIProvider:
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
        self.timeout = timeout
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._external_client = http_client
        # A pooled client is bound to the event loop it was first used on; remember which one so a
        # provider shared across loops (tests, sync wrappers) gets a fresh client instead of failing.
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"OpenAIProvider(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r})"

    # -- HTTP -----------------------------------------------------------------------------------

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

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    async def complete(self, request: LLMRequest) -> LLMResponse:
        body = self.request_body(request)
        response = await self._http().post(
            f"{self.base_url}/chat/completions", json=body, headers=self._headers()
        )
        if response.status_code >= 400:
            raise error_from_response(
                self.name, response.status_code, response.headers, _error_message(response)
            )
        try:
            payload = response.json()
        except ValueError:
            # A 2xx with a cut or non-JSON body is usually a proxy hiccup: worth another attempt.
            raise ProviderError(
                provider=self.name,
                message=f"response is not JSON: {response.text[:500]!r}",
                status=response.status_code,
                retryable=True,
            ) from None
        return self.parse_response(payload)

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
                    # Some compatible servers omit ids; the agent loop still needs one to pair results.
                    call_id=call.get("id") or f"call_{i}",
                    tool_name=function.get("name", ""),
                    arguments=_parse_arguments(function.get("arguments")),
                )
            )
        if any(isinstance(b, ToolUseBlock) for b in content):
            stop_reason: StopReason = "tool_use"
        else:
            stop_reason = _FINISH_REASONS.get(choice.get("finish_reason") or "", "end_turn")
            if stop_reason == "tool_use":  # claimed tool calls but sent none
                stop_reason = "end_turn"
        return LLMResponse(
            stop_reason=stop_reason,
            content=content,
            usage=_usage(payload.get("usage")),
            raw=payload,
        )


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
    elif message.role != "tool" and text:
        # "system"/"memory" origins are engine-written user turns, sent as user text.
        role = "system" if message.role == "system" else "user"
        out.append({"role": role, "content": text})
    # Image blocks carry only a content-store reference the provider cannot read; they are skipped.
    return out


def _result_text(result: ToolResultBlock) -> str:
    if isinstance(result.output, str) and result.output:
        return result.output
    return result.error or (result.output if isinstance(result.output, str) else "")


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


def _error_message(response: httpx.Response) -> str:
    try:
        message = _error_text(response.json())
    except ValueError:
        message = None
    return message or response.text[:2000] or response.reason_phrase or "error"
