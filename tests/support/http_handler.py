"""What the scripted HTTP servers of the tests share: a keep-alive request handler that writes JSON
answers, watches for a client that hung up and survives one that dropped its connection, and
running a server on a thread for the length of a ``with`` block."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LocalHTTPServer(ThreadingHTTPServer):
    """A threaded server on 127.0.0.1 (a free port) whose accept queue holds a burst of clients.

    socketserver's default queue is 5 connections: beyond it the kernel drops the handshake's last
    packet while the client believes it is connected, and a request of a burst (100 tasks calling
    at once, with the serving thread slowed by the test process's other threads) could wait a
    minute or more for an answer that never came."""

    request_queue_size = 1024
    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)


class QuietHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as httpx's pool expects

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:
            pass  # a client that dropped a kept-alive connection (e.g. after a cut stream)

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        """One whole answer: ``payload`` as JSON (``bytes`` as they are)."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        for key, value in {"content-type": "application/json", **(headers or {})}.items():
            self.send_header(key, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def client_left(self, seconds: float, until: threading.Event | None = None) -> bool:
        """Wait up to ``seconds`` (or until ``until`` is set); True as soon as the client hangs up."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0 and not (until is not None and until.is_set()):
            readable, _, _ = select.select([self.connection], [], [], min(left, 0.02))
            if readable:
                try:
                    if self.connection.recv(1, socket.MSG_PEEK) == b"":
                        return True
                except OSError:
                    return True
        return False

    def log_message(self, *args: Any) -> None:
        pass



@contextmanager
def running(server: Any) -> Iterator[Any]:
    """``server`` (anything with an ``httpd``) serving on a daemon thread until the block ends."""
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
