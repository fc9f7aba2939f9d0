"""A content store held in memory: the bodies of a task loaded from an export (see
``noeta.client.export``), for a replay or a test that must not touch a shared store."""

from __future__ import annotations

import threading

from noeta.context.content_store import ContentNotFoundError, content_hash
from noeta.protocols.messages import ContentRef


class MemoryContentStore:
    """Bodies by sha256 in a dict: the same hashes a local or PostgreSQL store gives them, so
    references recorded on a cluster resolve here. Thread-safe."""

    def __init__(self) -> None:
        """Starts empty."""
        self._bodies: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes, media_type: str = "text/plain") -> ContentRef:
        """Keep ``data`` under its sha256 and return its reference."""
        digest = content_hash(data)
        with self._lock:
            self._bodies.setdefault(digest, bytes(data))
        return ContentRef(hash=digest, size=len(data), media_type=media_type)

    def get(self, ref: ContentRef | str) -> bytes:
        """The body with that reference or hash; ContentNotFoundError when it was never put."""
        digest = ref if isinstance(ref, str) else ref.hash
        try:
            return self._bodies[digest]
        except KeyError:
            raise ContentNotFoundError(f"no body {digest} in this in-memory store") from None

    def items(self) -> list[tuple[str, bytes]]:
        """Every body with its hash (a copy: what was put so far)."""
        with self._lock:
            return list(self._bodies.items())

    def __len__(self) -> int:
        """How many bodies it holds."""
        return len(self._bodies)
