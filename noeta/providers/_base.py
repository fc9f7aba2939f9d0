"""What every HTTP provider adapter shares: the pooled client, timeouts, error classification and
the streaming skeleton. An adapter supplies its URL, headers, request body, response parser and a
:class:`StreamAssembler`; it never reaches into another adapter.

Every answer's rate-limit headers go to the call's limiter (noeta.providers.rate_headers).

Timeouts: ``LLMRequest.timeout_seconds`` (the worker sets it to what is left of the model call's
attempt, i.e. ``model_activity.start_to_close_seconds``) wins over the adapter's own ``timeout``, so a
long answer is never cut by a fixed HTTP timeout shorter than the attempt's. A timeout becomes a retryable
:class:`~noeta.errors.ProviderError` that says how long it waited.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from contextlib import aclosing
from typing import Any, Protocol

import httpx
from httpx_sse import ServerSentEvent, SSEError, aconnect_sse

from noeta.errors import ProviderError
from noeta.protocols.messages import DeltaCallback, LLMRequest, LLMResponse
from noeta.providers._shapes import error_text, error_type
from noeta.providers.errors import error_from_response
from noeta.providers.rate_headers import observe as observe_rate
from noeta.security.scrub import register_secret, scrub

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

    def payload(self) -> dict[str, Any]:
        """The assembled body, shaped like the API's non-streamed answer."""
        ...


class HTTPProvider:
    """Base of the httpx adapters: a pooled client per event loop (or one passed in), JSON posts,
    SSE streams, typed errors. ``complete`` posts :meth:`request_body` to :attr:`url`; ``stream``
    posts :meth:`stream_body` and folds the events with :meth:`new_assembler`."""

    name: str

    def __init__(
        self,
        *,
        name: str,
        timeout: float,
        http_client: httpx.AsyncClient | None,
        base_url: str,
        model: str | None,
        api_key: str | None,
    ) -> None:
        self.name = name
        self.timeout = timeout
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        """Kept out of ``repr`` and logs; an empty string means "send no key"."""
        register_secret(api_key)  # scrubbed from errors and logs wherever it is echoed
        self._external_client = http_client
        # A pooled client is bound to the event loop it was first used on; remember which one so a
        # provider shared across loops (tests, sync wrappers) gets a fresh client instead of failing.
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r})"

    # -- what an adapter provides ---------------------------------------------------------------

    @property
    def url(self) -> str:
        """The endpoint both calls post to."""
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def request_body(self, request: LLMRequest) -> dict[str, Any]:
        """The API's JSON body for ``request``."""
        raise NotImplementedError

    def stream_body(self, request: LLMRequest) -> dict[str, Any]:
        """The body of a streamed call: :meth:`request_body` plus the API's stream switches."""
        raise NotImplementedError

    def parse_response(self, payload: Any) -> LLMResponse:
        """The :class:`LLMResponse` of the API's JSON answer (streamed answers are assembled into one first)."""
        raise NotImplementedError

    def new_assembler(self, body: dict[str, Any]) -> StreamAssembler:
        """A fresh :class:`StreamAssembler` for one streamed call of ``body``."""
        raise NotImplementedError

    # -- the client -----------------------------------------------------------------------------

    def http(self) -> httpx.AsyncClient:
        """The client passed in, else this event loop's pooled client."""
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
        """How long ``request`` may take: its own ``timeout_seconds``, else the adapter's ``timeout``."""
        return request.timeout_seconds if request.timeout_seconds is not None else self.timeout

    def timeout_for(self, request: LLMRequest) -> httpx.Timeout:
        """The httpx timeouts of ``request``, connecting within at most ``CONNECT_TIMEOUT_SECONDS``."""
        seconds = self.timeout_seconds(request)
        return httpx.Timeout(seconds, connect=min(seconds, CONNECT_TIMEOUT_SECONDS))

    def timed_out(self, request: LLMRequest, exc: httpx.TimeoutException) -> ProviderError:
        """The retryable error of a call that got no answer in time, saying how long it waited."""
        return ProviderError(
            provider=self.name,
            message=f"no answer within {self.timeout_seconds(request):g} s ({type(exc).__name__})",
            retryable=True,
        )

    # -- calls ----------------------------------------------------------------------------------

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """One non-streamed call: the whole answer, or a typed :class:`~noeta.errors.ProviderError`."""
        return await self.post_json(self.url, self.request_body(request), self._headers(), request)

    async def stream(self, request: LLMRequest, on_delta: DeltaCallback) -> LLMResponse:
        """Like :meth:`complete`, over SSE, calling ``on_delta(kind, text)`` for each piece.

        Cancelling the awaiting task closes the HTTP stream (and so the server's generation).
        """
        return await self.stream_sse(self.url, self.stream_body(request), self._headers(), request, on_delta)


    async def post_json(self, url: str, body: dict[str, Any], headers: dict[str, str], request: LLMRequest) -> LLMResponse:
        """POST ``body`` and parse the 2xx JSON answer; a typed error otherwise."""
        try:
            response = await self.http().post(url, json=body, headers=headers, timeout=self.timeout_for(request))
        except httpx.TimeoutException as exc:
            raise self.timed_out(request, exc) from exc
        observe_rate(response.headers)
        if response.status_code >= 400:
            raise self.status_error(response)
        return self.parse_response(self._json_of(response, "response is not JSON:", 500, response.status_code))

    async def stream_sse(
        self, url: str, body: dict[str, Any], headers: dict[str, str], request: LLMRequest, on_delta: DeltaCallback
    ) -> LLMResponse:
        """POST ``body`` for an SSE answer, calling ``on_delta(kind, text)`` per piece as it arrives.

        Cancelling the awaiting task closes the HTTP stream (and so the server's generation).
        """
        assembler = self.new_assembler(body)
        try:
            # aconnect_sse sets "Accept: text/event-stream" itself; the adapter's JSON one would be a second.
            sse_headers = {k: v for k, v in headers.items() if k.lower() != "accept"}
            async with aconnect_sse(
                self.http(), "POST", url, json=body, headers=sse_headers, timeout=self.timeout_for(request)
            ) as source:
                response = source.response
                observe_rate(response.headers)
                if response.status_code >= 400:
                    await response.aread()
                    raise self.status_error(response)
                if is_json(response):  # a compatible server that ignores "stream": one whole body
                    return await self._unstreamed(response, on_delta)
                try:
                    # aclosing: leaving early (the stream said it is over) closes the event reader now.
                    async with aclosing(source.aiter_sse()) as events:
                        async for event in events:
                            if not event.data:  # a keep-alive that names an event but carries nothing
                                continue
                            for kind, text in assembler.feed(event):
                                await emit(on_delta, kind, text)
                            if assembler.ended:
                                break
                except SSEError as exc:  # a 2xx body that is neither JSON nor an event stream
                    await response.aread()
                    raise ProviderError(
                        provider=self.name,
                        message=scrub(f"stream ended early: {exc}; body {response.text[:200]!r}"),
                        retryable=True,  # usually a proxy's page in place of the answer
                    ) from None
        except httpx.TimeoutException as exc:
            raise self.timed_out(request, exc) from exc
        if not assembler.complete:
            # The connection closed cleanly but the stream never said it was complete: a proxy or
            # server hiccup, worth another attempt.
            raise ProviderError(provider=self.name, message="stream ended early", retryable=True)
        return self.parse_response(assembler.payload())

    async def _unstreamed(self, response: httpx.Response, on_delta: DeltaCallback) -> LLMResponse:
        """A 2xx JSON answer to a streamed call: parsed as a whole, its text delivered as one delta."""
        await response.aread()
        result = self.parse_response(self._json_of(response, "stream ended early: non-JSON body", 200, None))
        await emit(on_delta, "text", result.text)
        return result

    def _json_of(self, response: httpx.Response, problem: str, quoted: int, status: int | None) -> Any:
        """The JSON of a 2xx answer. A cut or non-JSON body is usually a proxy hiccup: a retryable
        error saying ``problem`` and quoting the body's first ``quoted`` characters."""
        try:
            return response.json()
        except ValueError:
            raise ProviderError(
                provider=self.name, message=scrub(f"{problem} {response.text[:quoted]!r}"), status=status, retryable=True
            ) from None

    # -- errors ---------------------------------------------------------------------------------

    def status_error(self, response: httpx.Response) -> ProviderError:
        """The typed error of an HTTP error answer (its body read)."""
        try:
            body = response.json()
        except ValueError:
            body = None
        text = error_text(body) or response.text[:2000] or response.reason_phrase or "error"
        return error_from_response(self.name, response.status_code, response.headers, text, error_type(body))

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
        return error_from_response(self.name, status, {}, error_text(data) or str(data)[:500], error_type(data))


async def emit(on_delta: DeltaCallback, kind: str, text: str) -> None:
    """Hand one non-empty streamed piece to ``on_delta``, awaiting it when it is a coroutine function."""
    if not text:
        return
    result = on_delta(kind, text)
    if inspect.isawaitable(result):
        await result


def is_json(response: httpx.Response) -> bool:
    """Whether the answer's body is JSON, whatever parameters its content type carries."""
    return bool(response.headers.get("content-type", "").split(";")[0].strip() == "application/json")


__all__ = ["HTTPProvider", "StreamAssembler", "emit", "is_json"]
