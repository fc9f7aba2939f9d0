"""What every HTTP provider adapter shares: the pooled client, timeouts, error classification and
the streaming skeleton. An adapter supplies its URL, headers, request body, response parser and a
:class:`StreamAssembler`; it never reaches into another adapter.

Timeouts: ``LLMRequest.timeout_seconds`` (the worker sets it to what is left of the model call's
attempt, i.e. ``Options.model_timeout_seconds``) wins over the adapter's own ``timeout``, so a long
answer is never cut by a fixed HTTP timeout shorter than the option. A timeout becomes a retryable
:class:`~noeta.errors.ProviderError` that says how long it waited.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Protocol

import httpx

from noeta.errors import ProviderError
from noeta.protocols.messages import LLMRequest, LLMResponse
from noeta.providers._sse import OnDelta, ServerSentEvent, aiter_events, emit
from noeta.providers.errors import error_from_response
from noeta.providers.shapes import error_text
from noeta.security.scrub import scrub

#: Longest wait for a TCP connection, whatever the request's timeout.
CONNECT_TIMEOUT_SECONDS = 10.0


class StreamAssembler(Protocol):
    """Folds one streamed answer back into the body a non-streamed call would have returned."""

    @property
    def ended(self) -> bool:
        """The stream said it is over: stop reading."""
        ...

    @property
    def complete(self) -> bool:
        """Enough arrived to be a whole answer (checked when the stream closes)."""
        ...

    def feed(self, event: ServerSentEvent) -> list[tuple[str, str]]:
        """Fold one event in; the ``(kind, text)`` deltas it carried. Raises ProviderError for an
        error the server reported inside the stream."""
        ...

    def payload(self) -> dict[str, Any]: ...


class HTTPProvider:
    """Base of the httpx adapters: a pooled client per event loop (or one passed in), JSON posts,
    SSE streams, typed errors."""

    name: str

    def __init__(self, *, name: str, timeout: float, http_client: httpx.AsyncClient | None) -> None:
        self.name = name
        self.timeout = timeout
        self._external_client = http_client
        # A pooled client is bound to the event loop it was first used on; remember which one so a
        # provider shared across loops (tests, sync wrappers) gets a fresh client instead of failing.
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    # -- what an adapter provides ---------------------------------------------------------------

    def parse_response(self, payload: Any) -> LLMResponse:
        raise NotImplementedError

    def new_assembler(self, body: dict[str, Any]) -> StreamAssembler:
        raise NotImplementedError

    # -- the client -----------------------------------------------------------------------------

    def http(self) -> httpx.AsyncClient:
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

    def timeout_seconds(self, request: LLMRequest) -> float:
        return request.timeout_seconds if request.timeout_seconds is not None else self.timeout

    def timeout_for(self, request: LLMRequest) -> httpx.Timeout:
        seconds = self.timeout_seconds(request)
        return httpx.Timeout(seconds, connect=min(seconds, CONNECT_TIMEOUT_SECONDS))

    def timed_out(self, request: LLMRequest, exc: httpx.TimeoutException) -> ProviderError:
        return ProviderError(
            provider=self.name,
            message=f"no answer within {self.timeout_seconds(request):g} s ({type(exc).__name__})",
            retryable=True,
        )

    # -- calls ----------------------------------------------------------------------------------

    async def post_json(self, url: str, body: dict[str, Any], headers: dict[str, str], request: LLMRequest) -> LLMResponse:
        """POST ``body`` and parse the 2xx JSON answer; a typed error otherwise."""
        try:
            response = await self.http().post(url, json=body, headers=headers, timeout=self.timeout_for(request))
        except httpx.TimeoutException as exc:
            raise self.timed_out(request, exc) from exc
        if response.status_code >= 400:
            raise self.status_error(response)
        try:
            payload = response.json()
        except ValueError:
            # A 2xx with a cut or non-JSON body is usually a proxy hiccup: worth another attempt.
            raise ProviderError(
                provider=self.name,
                message=scrub(f"response is not JSON: {response.text[:500]!r}"),
                status=response.status_code,
                retryable=True,
            ) from None
        return self.parse_response(payload)

    async def stream_sse(
        self, url: str, body: dict[str, Any], headers: dict[str, str], request: LLMRequest, on_delta: OnDelta
    ) -> LLMResponse:
        """POST ``body`` for an SSE answer, calling ``on_delta(kind, text)`` per piece as it arrives.

        Cancelling the awaiting task closes the HTTP stream (and so the server's generation).
        """
        assembler = self.new_assembler(body)
        headers = {**headers, "accept": "text/event-stream"}
        try:
            async with self.http().stream(
                "POST", url, json=body, headers=headers, timeout=self.timeout_for(request)
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise self.status_error(response)
                if is_json(response):  # a compatible server that ignores "stream": one whole body
                    return await self._unstreamed(response, on_delta)
                async for event in aiter_events(response):
                    for kind, text in assembler.feed(event):
                        await emit(on_delta, kind, text)
                    if assembler.ended:
                        break
        except httpx.TimeoutException as exc:
            raise self.timed_out(request, exc) from exc
        if not assembler.complete:
            # The connection closed cleanly but the stream never said it was complete: a proxy or
            # server hiccup, worth another attempt.
            raise ProviderError(provider=self.name, message="stream ended early", retryable=True)
        return self.parse_response(assembler.payload())

    async def _unstreamed(self, response: httpx.Response, on_delta: OnDelta) -> LLMResponse:
        """A 2xx JSON answer to a streamed call: parsed as a whole, its text delivered as one delta."""
        await response.aread()
        try:
            payload = response.json()
        except ValueError:
            raise ProviderError(
                provider=self.name, message=scrub(f"stream ended early: non-JSON body {response.text[:200]!r}"), retryable=True
            ) from None
        result = self.parse_response(payload)
        await emit(on_delta, "text", result.text)
        return result

    # -- errors ---------------------------------------------------------------------------------

    def status_error(self, response: httpx.Response) -> ProviderError:
        """The typed error of an HTTP error answer (its body read)."""
        try:
            message = error_text(response.json())
        except ValueError:
            message = None
        text = message or response.text[:2000] or response.reason_phrase or "error"
        return error_from_response(self.name, response.status_code, response.headers, text)

    def event_json(self, event: ServerSentEvent) -> Any:
        """The JSON data of a stream event; a cut or garbled event is worth another attempt."""
        try:
            return json.loads(event.data)
        except ValueError:
            raise ProviderError(
                provider=self.name, message=scrub(f"stream event is not JSON: {event.data[:500]!r}"), retryable=True
            ) from None

    def in_stream_error(self, data: dict[str, Any], status: int) -> ProviderError:
        """An error the server reported inside a 200 stream, classified as if it had that status."""
        return error_from_response(self.name, status, {}, error_text(data) or str(data)[:500])


def is_json(response: httpx.Response) -> bool:
    return bool(response.headers.get("content-type", "").split(";")[0].strip() == "application/json")


__all__ = ["HTTPProvider", "OnDelta", "StreamAssembler", "is_json"]
