"""Folding a Messages API stream back into one Messages response body."""

from __future__ import annotations

from typing import Any

from httpx_sse import ServerSentEvent

from noeta.providers._anthropic_wire import error_status
from noeta.providers._base import HTTPProvider
from noeta.providers._shapes import (
    Shape,
    parse_arguments,
)


class EventAssembler:
    """Folds Messages stream events into one Messages response body."""

    def __init__(self, provider: HTTPProvider, model: str) -> None:
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
        self.ended = False
        """``message_stop`` arrived: the stream is over, and the answer whole."""

    @property
    def complete(self) -> bool:
        """Whole once ``message_stop`` arrived (see :class:`StreamAssembler`)."""
        return self.ended

    def feed(self, event: ServerSentEvent) -> list[tuple[str, str]]:
        data = self.provider.event_json(event)
        if not isinstance(data, dict):
            return []
        kind = data.get("type") or event.event
        if kind == "error":
            raise self.provider.in_stream_error(data, error_status(data))
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
            self.ended = True
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
