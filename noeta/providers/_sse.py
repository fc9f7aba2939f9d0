"""A small Server-Sent Events parser shared by the streaming adapters.

Follows the WHATWG event-stream rules that matter for LLM APIs: ``field: value`` lines (one
optional space after the colon is dropped), ``data`` lines of one event joined with ``\\n``, a
blank line ends an event, lines starting with ``:`` are comments (keep-alives), unknown fields are
ignored, and an event with no ``data`` is not dispatched. Line splitting (``\\n``, ``\\r\\n``,
``\\r``) is left to httpx's ``aiter_lines``.

OpenAI ends its stream with ``data: [DONE]``; that is an ordinary event here (``data == "[DONE]"``)
for the caller to recognise. Anthropic names each event (``event: content_block_delta``) and
repeats the name as ``type`` inside the JSON data.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx

DONE = "[DONE]"

OnDelta = Callable[[str, str], Any]
"""``on_delta(kind, text)``; kind is ``"text"``, ``"thinking"`` or ``"tool_use"`` (partial JSON
arguments). May be a plain function or a coroutine function."""


@dataclass(frozen=True)
class ServerSentEvent:
    data: str
    event: str | None = None
    id: str | None = None


class SSEDecoder:
    """Feed lines (without their line terminator); get an event back at each event boundary."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None

    def feed(self, line: str) -> ServerSentEvent | None:
        line = line.rstrip("\r\n")
        if not line:
            return self.flush()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value or None
        elif name == "id" and "\0" not in value:
            self._id = value
        # "retry" and unknown fields are ignored.
        return None

    def flush(self) -> ServerSentEvent | None:
        """End the current event (a blank line, or the end of the stream)."""
        if not self._data:
            self._event = None  # an event without data is dropped, per the spec
            return None
        event = ServerSentEvent(data="\n".join(self._data), event=self._event, id=self._id)
        self._data, self._event = [], None
        return event


async def aiter_events(response: httpx.Response) -> AsyncIterator[ServerSentEvent]:
    """The events of a streaming httpx response, as they arrive."""
    decoder = SSEDecoder()
    async for line in response.aiter_lines():
        event = decoder.feed(line)
        if event is not None:
            yield event
    last = decoder.flush()
    if last is not None:
        yield last


async def emit(on_delta: OnDelta, kind: str, text: str) -> None:
    """Call ``on_delta`` for a non-empty piece, awaiting it if it is a coroutine function."""
    if not text:
        return
    result = on_delta(kind, text)
    if inspect.isawaitable(result):
        await result
