"""A scripted OpenAI Chat Completions endpoint on 127.0.0.1, for provider and retry tests.

A reply whose body is a ``dict`` (or ``bytes``) is sent as one JSON body. A reply whose body is a
``list`` is sent as a Server-Sent Events stream, chunked as it is written: each ``dict`` is one
event (a ``chat.completion.chunk`` here; :mod:`tests.support.messages_server` frames Anthropic
events), a ``str`` is written verbatim (raw SSE text), and a :class:`Pause` holds the stream open
while watching for the client to hang up (``server.disconnects`` counts those). A chat stream
ends with ``data: [DONE]`` unless the reply says ``done=False``.

The payload builders here (``completion``, ``chunk``, ``chunks_for``, ``error_body``) are the
fixtures that ``tests/test_wire_shapes.py`` checks against the ``openai`` package's own models.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.support.http_handler import LocalHTTPServer, QuietHandler, running

CREATED = 1_700_000_000
MODEL = "gpt-test"


@dataclass(frozen=True)
class Pause:
    """Hold the stream open for ``seconds`` (the client may hang up meanwhile), or until ``until``
    is set, whichever comes first."""

    seconds: float
    until: threading.Event | None = None


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    done: bool = True
    """For a streamed (list) body of the chat server: end with ``data: [DONE]``."""


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any
    at: float = 0.0
    """time.monotonic() when the request arrived."""


class ScriptedServer:
    """A scripted JSON-over-HTTP endpoint: records each request, answers with the next reply."""

    url_suffix = ""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.seen: list[Seen] = []
        self.disconnects = 0
        """Streams the client closed while a :class:`Pause` held them open."""
        self.disconnected = threading.Event()
        outer = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.seen.append(
                    Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw), time.monotonic())
                )
                reply = outer.next_reply()
                if isinstance(reply.body, list):
                    self._stream(reply)
                    return
                self.send_json(reply.status, reply.body, reply.headers)

            def _stream(self, reply: Reply) -> None:
                self.send_response(reply.status)
                for key, value in {"content-type": "text/event-stream", "cache-control": "no-cache", **reply.headers}.items():
                    self.send_header(key, value)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                items: list[Any] = [*reply.body, *outer.stream_tail(reply)]
                try:
                    for item in items:
                        if isinstance(item, Pause):
                            if self.client_left(item.seconds, item.until):
                                outer.disconnects += 1
                                outer.disconnected.set()
                                self.close_connection = True
                                return
                            continue
                        text = item if isinstance(item, str) else outer.frame(item)
                        self._chunk(text.encode())
                    self._chunk(b"")  # the terminating zero-length chunk
                except (BrokenPipeError, ConnectionResetError):
                    outer.disconnects += 1
                    outer.disconnected.set()
                    self.close_connection = True

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        self.httpd = LocalHTTPServer(Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}{self.url_suffix}"

    def next_reply(self) -> Reply:
        """The answer to the request just recorded in ``seen``: the next queued reply (a server
        that answers from the request itself overrides this)."""
        return self.replies.pop(0)

    def reply(self, body: Any = None, status: int = 200, *, done: bool = True, **headers: str) -> None:
        """Queue a reply; ``retry_after="2"`` becomes the header ``retry-after: 2``."""
        self.replies.append(Reply(status, body, {k.replace("_", "-"): v for k, v in headers.items()}, done))

    # -- SSE framing (per protocol) ------------------------------------------------------------

    def frame(self, event: dict[str, Any]) -> str:
        return f"data: {json.dumps(event)}\n\n"

    def stream_tail(self, reply: Reply) -> list[Any]:
        return []


class FakeChatServer(ScriptedServer):
    """A scripted Chat Completions endpoint; ``base_url`` ends in ``/v1``."""

    url_suffix = "/v1"

    def stream_tail(self, reply: Reply) -> list[Any]:
        return ["data: [DONE]\n\n"] if reply.done else []


@contextmanager
def running_chat_server() -> Iterator[FakeChatServer]:
    with running(FakeChatServer()) as server:
        yield server


# -- payloads -----------------------------------------------------------------------------------


def completion(message: dict[str, Any], finish_reason: str = "stop", usage: Any = None) -> dict[str, Any]:
    """A ``chat.completion`` body."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": CREATED,
        "model": MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}],
        "usage": usage or {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }


def chunk(delta: dict[str, Any] | None = None, finish_reason: str | None = None, usage: Any = None) -> dict[str, Any]:
    """One ``chat.completion.chunk``; ``delta=None`` with ``usage`` gives the final usage chunk
    (empty ``choices``), as ``stream_options.include_usage`` makes OpenAI send."""
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": CREATED, "model": MODEL}
    if delta is None:
        body["choices"] = []
    else:
        body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    if usage is not None:
        body["usage"] = usage
    return body


def chunks_for(payload: dict[str, Any], pieces: int = 3) -> list[dict[str, Any]]:
    """The chunk stream OpenAI would send for the ``chat.completion`` ``payload``: the role, the
    text in ``pieces`` parts, each tool call's header then its arguments in parts, the finish
    reason, and the usage chunk."""
    choice = payload["choices"][0]
    message = choice["message"]
    out = [chunk({"role": "assistant", "content": ""})]
    for part in _split(message.get("content") or "", pieces):
        out.append(chunk({"content": part}))
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        out.append(
            chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function", "function": {"name": function["name"], "arguments": ""}}]})
        )
        for part in _split(function["arguments"], pieces):
            out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]}))
    out.append(chunk({}, finish_reason=choice["finish_reason"]))
    out.append(chunk(None, usage=payload["usage"]))
    return out


def _split(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def error_body(message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}


def openai_for(server: FakeChatServer, name: str = "openai-local") -> Any:
    """An OpenAIProvider pointed at ``server``, registered under ``name``."""
    from noeta.providers.openai import OpenAIProvider

    return OpenAIProvider(base_url=server.base_url, api_key="sk-test", model="gpt-test", name=name)
