"""A TCP proxy in front of the Temporal server whose answers can be held back: while stalled, what
the client sends still reaches the server (which acts on it), but nothing the server answers comes
back until :meth:`StallingProxy.resume`. A client's calls then time out although the server did
their work: the lost-answer failure a start must survive."""

from __future__ import annotations

import socket
import threading


class StallingProxy:
    """Forwards 127.0.0.1:<port> to ``target``; :meth:`stall` holds back the server's bytes."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._sockets: list[socket.socket] = []
        self._closed = False
        self.held_chunks = 0
        """Chunks of the server's answers that waited for :meth:`resume`."""
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stall(self) -> None:
        """Hold back everything the server sends from now on."""
        self._flowing.clear()

    def resume(self) -> None:
        """Deliver what was held back, and forward again."""
        self._flowing.set()

    def close(self) -> None:
        self._closed = True
        self._flowing.set()
        for sock in [self._listener, *self._sockets]:
            try:
                sock.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                return
            server.settimeout(None)
            self._sockets += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, answers: bool) -> None:
        try:
            while data := source.recv(65536):
                if answers and not self._flowing.is_set():
                    self.held_chunks += 1
                    self._flowing.wait()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
