"""A scripted Anthropic Messages endpoint on 127.0.0.1 (``POST /v1/messages``).

Same machinery as :mod:`tests.support.chat_server`: a ``dict`` body is one JSON response, a
``list`` body is an SSE stream in which each ``dict`` event is framed as Anthropic frames it
(``event: <type>`` then ``data: <json>``), a ``str`` is raw SSE text and a :class:`Pause` holds
the stream open. ``base_url`` has no ``/v1`` (the provider appends ``/v1/messages``).

The payload builders here (``message``, ``events_for``, ``anthropic_error``) are the fixtures that
``tests/test_wire_shapes.py`` checks against the ``anthropic`` package's own models.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.chat_server import Pause, ScriptedServer, _split, running

__all__ = [
    "FakeMessagesServer",
    "Pause",
    "anthropic_error",
    "events_for",
    "message",
    "running_messages_server",
]

MODEL = "claude-test"


class FakeMessagesServer(ScriptedServer):
    """A scripted Messages API endpoint."""

    def frame(self, event: dict[str, Any]) -> str:
        return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"


@contextmanager
def running_messages_server() -> Iterator[FakeMessagesServer]:
    with running(FakeMessagesServer()) as server:
        yield server


# -- payloads -----------------------------------------------------------------------------------


def message(
    content: list[dict[str, Any]],
    stop_reason: str | None = "end_turn",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Messages API response body."""
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 12, "output_tokens": 5},
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def thinking(value: str, signature: str = "sig-abc") -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": signature}


def events_for(payload: dict[str, Any], pieces: int = 3, ping: bool = True) -> list[dict[str, Any]]:
    """The event stream Anthropic would send for the response body ``payload``: message_start
    (input usage, one output token), per block a start / deltas in ``pieces`` parts / stop, a
    ping, message_delta (stop reason, output usage) and message_stop."""
    usage = dict(payload["usage"])
    start_usage = {**usage, "output_tokens": 1}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**payload, "content": [], "stop_reason": None, "usage": start_usage}}
    ]
    for index, block in enumerate(payload["content"]):
        kind = block["type"]
        if kind == "text":
            start, deltas = {"type": "text", "text": ""}, [
                {"type": "text_delta", "text": p} for p in _split(block["text"], pieces)
            ]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _split(block["thinking"], pieces)]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "tool_use":
            start = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in _split(json.dumps(block["input"]), pieces)
            ]
        else:
            raise ValueError(f"no stream form for {kind!r} blocks")
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        if index == 0 and ping:
            events.append({"type": "ping"})
        events.extend({"type": "content_block_delta", "index": index, "delta": d} for d in deltas)
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": payload["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return events


def anthropic_error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    """An error body (also the data of an in-stream ``error`` event)."""
    return {"type": "error", "error": {"type": kind, "message": message}}
