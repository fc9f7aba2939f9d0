"""Folding a Chat Completions stream (``chat.completion.chunk`` events) back into one
``chat.completion`` body."""


from __future__ import annotations

import time
from typing import Any

from httpx_sse import ServerSentEvent

from noeta.providers._base import HTTPProvider
from noeta.providers._shapes import (
    Shape,
    fallback_call_id,
)

#: The data of the event that ends a Chat Completions stream.
DONE = "[DONE]"


class ChunkAssembler:
    """Folds ``chat.completion.chunk`` events into one ``chat.completion`` body."""

    def __init__(self, provider: HTTPProvider, model: str | None) -> None:
        self.provider = provider
        self.requested_model = model
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
        self.ended = False
        """``[DONE]`` arrived: the stream is over."""

    @property
    def complete(self) -> bool:
        """Whole once ``[DONE]`` or a finish reason arrived (see :class:`StreamAssembler`)."""
        return self.ended or self.finish_reason is not None

    def feed(self, event: ServerSentEvent) -> list[tuple[str, str]]:
        if event.data == DONE:
            self.ended = True
            return []
        chunk = self.provider.event_json(event)
        if not isinstance(chunk, dict):
            return []
        if chunk.get("error") is not None:  # an error reported mid-stream
            error = chunk.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            # Without an HTTP status to go by, an error inside a 200 stream counts as a server error.
            raise self.provider.in_stream_error(chunk, code if isinstance(code, int) and code >= 400 else 500)
        return self.add(chunk)

    def add(self, chunk: dict[str, Any]) -> list[tuple[str, str]]:
        """Fold one chunk in; return the (kind, text) deltas it carried, in order."""
        self.id = chunk.get("id") or self.id
        self.model = chunk.get("model") or self.model
        self.created = chunk.get("created") or self.created
        self.system_fingerprint = chunk.get("system_fingerprint") or self.system_fingerprint
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        deltas: list[tuple[str, str]] = []
        shape = Shape(self.provider.name)
        for choice in shape.list_or_none(chunk.get("choices"), "chunk choices"):
            choice = shape.obj(choice, "chunk choices[]")
            if choice.get("index", 0) != 0:
                continue  # n > 1 is never requested
            delta = shape.obj(choice.get("delta") or {}, "chunk choices[].delta")
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
            for position, piece in enumerate(shape.list_or_none(delta.get("tool_calls"), "delta.tool_calls")):
                piece = shape.obj(piece, "delta.tool_calls[]")
                index = piece.get("index", position)
                call = self.calls.setdefault(
                    index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                if piece.get("id"):
                    call["id"] = piece["id"]
                function = shape.obj(piece.get("function") or {}, "delta.tool_calls[].function")
                if isinstance(function.get("name"), str):
                    call["function"]["name"] += function["name"]
                arguments = function.get("arguments")
                if isinstance(arguments, str) and arguments:
                    call["function"]["arguments"] += arguments
                    deltas.append(("tool_use", arguments))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return deltas

    def payload(self) -> dict[str, Any]:
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
            "model": self.model or self.requested_model or "",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
        }
        if self.system_fingerprint:
            payload["system_fingerprint"] = self.system_fingerprint
        if self.usage is not None:
            payload["usage"] = self.usage
        return payload
