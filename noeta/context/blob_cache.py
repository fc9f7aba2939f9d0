"""Small stored bodies that every model call of a task reads (its system prompt, output schema and
volatile context), kept in memory by content hash.

Content is addressed by its hash, so a body once read never changes: a hit needs no check
against the store. Keeping these in memory lets a model call whose transcript is cached build its
request without touching the store, on the event loop, instead of paying a trip to the I/O
threads for it (see ModelCalls.call_model in noeta.activities.model_call).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from noeta.context.content_store import ContentStore
from noeta.protocols.messages import ContentRef

#: Bodies larger than this are read from the store each time (a system prompt is a few KB).
MAX_BODY_BYTES = 64 * 1024
#: What the cache may hold in all, least recently used first out.
DEFAULT_LIMIT_BYTES = 8 * 2**20


class BlobCache:
    """Reads through to ``store``; thread-safe (model calls read from the I/O threads too)."""

    def __init__(self, store: ContentStore, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        """``limit_bytes``: what the cache may hold in all before the least recently used bodies go.
        """
        self.store = store
        self._limit = limit_bytes
        self._size = 0
        self._bodies: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def cached(self, ref: ContentRef) -> bytes | None:
        """``ref``'s body if it is in memory (the store is not read), else None."""
        with self._lock:
            body = self._bodies.get(ref.hash)
            if body is not None:
                self._bodies.move_to_end(ref.hash)
            return body

    def get(self, ref: ContentRef) -> bytes:
        """``ref``'s body, from memory when cached, else read from the store (and cached unless over
        MAX_BODY_BYTES); the store's error when it has none."""
        body = self.cached(ref)
        if body is not None:
            return body
        body = self.store.get(ref)  # outside the lock: other readers are not held up by the store
        if len(body) <= MAX_BODY_BYTES:
            with self._lock:
                if ref.hash not in self._bodies:
                    self._bodies[ref.hash] = body
                    self._size += len(body)
                    while self._size > self._limit:
                        _, dropped = self._bodies.popitem(last=False)
                        self._size -= len(dropped)
        return body
