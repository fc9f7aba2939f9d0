"""A Chat Completions server that misbehaves on purpose: the provider side of the fault-injection tests.

Each request takes the next fault from ``faults`` (then answers normally):

- ``"hang"``: never answers (holds the connection until the client hangs up);
- ``"trickle"``: sends a 200 and then one byte every 0.2 s, never finishing the body;
- ``"reset"``: closes the connection with a TCP reset before answering;
- ``"null_message"`` / ``"oops_tool_calls"``: a 200 whose ``choices[0].message`` is null / whose
  ``tool_calls`` is the string ``"oops"``;
- ``"oversized"``: a 200 whose answer text is 3 MiB;
- ``"429"``: a 429 with ``retry-after: 1``;
- ``("slow", seconds)``: the normal answer after ``seconds``.

``quota=(n, seconds)`` admits at most ``n`` requests per fixed ``seconds`` window (windows start at
multiples of ``seconds``); the others get a 429 whose ``retry-after`` is the time to the next window,
as hosted APIs do. ``refuse_first=True`` answers the first request of each conversation (by its
first message) with a 429 and ``retry-after: 1``, whatever the load. ``rate_headers=True`` (with a
quota) announces what is left of the window on every answer, as OpenAI does
(``x-ratelimit-limit-requests``, ``x-ratelimit-remaining-requests``, ``x-ratelimit-reset-requests``
as a duration such as ``0.734s``). The normal answer comes from ``answer(body)``: by default the text ``"ok"``.
Every request is logged in ``seen`` (time, status) so tests can check what the server served.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.support.chat_server import completion
from tests.support.http_handler import LocalHTTPServer, QuietHandler, running

Fault = Any  # a str or ("slow", seconds)


@dataclass
class Served:
    at: float
    status: int
    fault: str


@dataclass
class FaultServer:
    faults: list[Fault] = field(default_factory=list)
    quota: tuple[int, float] | None = None
    refuse_first: bool = False
    rate_headers: bool = False
    answer: Callable[[dict[str, Any]], dict[str, Any]] = lambda body: completion({"content": "ok"})
    seen: list[Served] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._window: tuple[int, int] = (-1, 0)  # (window index, requests admitted in it)
        self._conversations: set[str] = set()
        outer = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                fault, retry_after, rate = outer._next(body)
                name = fault if isinstance(fault, str) else fault[0]
                if name == "quota":
                    outer._log(429, name)
                    self.send_json(
                        429, {"error": {"message": "quota exceeded"}}, {"retry-after": f"{retry_after:.3f}", **rate}
                    )
                elif name == "hang":
                    outer._log(0, name)
                    self.client_left(120)
                    self.close_connection = True
                elif name == "trickle":
                    outer._log(200, name)
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", "1000000")
                    self.end_headers()
                    for _ in range(600):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(0.2)
                elif name == "reset":
                    outer._log(0, name)
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                elif name == "429":
                    outer._log(429, name)
                    self.send_json(429, {"error": {"message": "slow down"}}, {"retry-after": "1"})
                elif name == "null_message":
                    outer._log(200, name)
                    payload = completion({"content": "x"})
                    payload["choices"][0]["message"] = None
                    self.send_json(200, payload)
                elif name == "oops_tool_calls":
                    outer._log(200, name)
                    self.send_json(200, completion({"content": None, "tool_calls": "oops"}, "tool_calls"))
                elif name == "oversized":
                    outer._log(200, name)
                    self.send_json(200, completion({"content": "y" * (3 * 1024 * 1024)}))
                else:
                    if name == "slow":
                        time.sleep(fault[1])
                    outer._log(200, name)
                    self.send_json(200, outer.answer(body), rate)

        self.httpd = LocalHTTPServer(Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def _next(self, body: dict[str, Any]) -> tuple[Fault, float, dict[str, str]]:
        """The fault for this request, the retry-after of a refusal and the rate-limit headers."""
        with self._lock:
            if self.refuse_first:
                first = json.dumps(body.get("messages", [])[:2], sort_keys=True)
                if first not in self._conversations:
                    self._conversations.add(first)
                    return "quota", 1.0, {}
            if self.quota is not None:
                limit, seconds = self.quota
                now = time.time()
                index = math.floor(now / seconds)
                window, admitted = self._window
                if window != index:
                    window, admitted = index, 0
                reset = (index + 1) * seconds - now
                if admitted >= limit:
                    self._window = (window, admitted)
                    return "quota", reset, self._rate(limit, 0, reset)
                self._window = (window, admitted + 1)
                rate = self._rate(limit, limit - admitted - 1, reset)
            else:
                rate = {}
            return (self.faults.pop(0) if self.faults else "ok"), 0.0, rate

    def _rate(self, limit: int, remaining: int, reset: float) -> dict[str, str]:
        if not self.rate_headers:
            return {}
        return {
            "x-ratelimit-limit-requests": str(limit),
            "x-ratelimit-remaining-requests": str(remaining),
            "x-ratelimit-reset-requests": f"{math.ceil(reset * 1000) / 1000:.3f}s",
        }

    def _log(self, status: int, fault: str) -> None:
        with self._lock:
            self.seen.append(Served(time.monotonic(), status, fault))

    def served(self, status: int) -> int:
        return sum(1 for s in self.seen if s.status == status)


@contextmanager
def running_fault_server(**kwargs: Any) -> Iterator[FaultServer]:
    with running(FaultServer(**kwargs)) as server:
        yield server
