"""Transcripts as a hash chain in the content store.

Each model call stores one node ``{"parent": <hash or null>, "messages": [...]}`` holding the
messages added since the previous call. The workflow passes only the head reference and the new
messages to the model activity, so every step adds a bounded number of bytes to history whatever
the conversation's length. Large tool outputs inside messages stay references; they are resolved
when a provider request is built.
"""

from __future__ import annotations

import base64
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass

from pydantic import TypeAdapter

from noeta.context.content_store import ContentStore, RetainingStore
from noeta.protocols.messages import (
    Block,
    ContentRef,
    ImageBlock,
    Message,
    ToolResultBlock,
)
from noeta.config.tuning import SETTINGS

NODE_MEDIA_TYPE = "application/vnd.noeta.transcript+json"
_MESSAGES = TypeAdapter(list[Message])


@dataclass(frozen=True)
class _Chain:
    messages: tuple[Message, ...]
    size: int
    """The stored bytes of every node of the chain: the cache's measure of it."""
    refs: bool = False
    """Whether a message holds a stored body (a large tool output, an image) that resolve() reads."""


_EMPTY = _Chain((), 0)


class TranscriptStore:
    """Reads and extends transcript chains. Thread-safe: activities call it from worker threads.

    Each task's chain is kept decoded at its newest head, so a model call reads nothing back: the
    cache holds one entry per task (a new head replaces its parent) and is bounded by the chains'
    stored size (``cache_mb``), not by a count, so that a worker running many tasks at once keeps
    them all while a few long transcripts cannot take its memory. A chain that is not cached is
    read back from its newest cached ancestor."""

    def __init__(self, store: ContentStore, cache_mb: float = SETTINGS["transcript_cache_mb"].default) -> None:
        """``store`` holds the chains' nodes; ``cache_mb`` bounds the decoded chains kept in memory.
        """
        self.store = store
        self._cache: OrderedDict[str, _Chain] = OrderedDict()
        self._cache_limit = int(cache_mb * 2**20)
        self._cache_size = 0
        self._lock = threading.Lock()  # guards the cache only; store I/O runs outside it

    def load(self, head: ContentRef | None) -> tuple[Message, ...]:
        """Every message of the chain ending at ``head`` (none for None), from the cache or read
        back from the store."""
        if head is None:
            return ()
        chain = self._cached(head.hash)
        if chain is None:
            chain = self._read_back(head.hash)
            self._remember(head.hash, chain)
        return chain.messages

    def in_memory(self, head: ContentRef | None) -> tuple[Message, ...] | None:
        """The chain at ``head`` when this store holds it and resolving it reads nothing (it has
        no stored bodies in it), else None: what :meth:`load` gives without touching the store."""
        if head is None:
            return ()
        chain = self._cached(head.hash)
        return chain.messages if chain is not None and not chain.refs else None

    def _read_back(self, digest: str) -> _Chain:
        """The chain ending at node ``digest``: walked back to the newest cached ancestor, then
        decoded forward."""
        nodes: list[list[Message]] = []
        at: str | None = digest
        prefix = _EMPTY
        size = 0
        while at is not None:
            known = self._cached(at)
            if known is not None:
                prefix = known
                break
            data = self.store.get(at)
            size += len(data)
            node = json.loads(data)
            nodes.append(_MESSAGES.validate_python(node["messages"]))
            at = node["parent"]
        messages = list(prefix.messages)
        for chunk in reversed(nodes):
            messages.extend(chunk)
        refs = prefix.refs or any(has_refs(m) for chunk in nodes for m in chunk)
        return _Chain(tuple(messages), prefix.size + size, refs)

    def append(self, head: ContentRef | None, messages: list[Message]) -> ContentRef:
        """Store a node holding ``messages`` after ``head`` and return the new head."""
        body = {
            "parent": head.hash if head else None,
            "messages": _MESSAGES.dump_python(messages, mode="json"),
        }
        data = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
        ref = self.store.put(data, NODE_MEDIA_TYPE)
        referenced = _referenced(messages)
        if referenced and isinstance(self.store, RetainingStore):
            self.store.claim(referenced)  # e.g. images a client stored: they belong to this task too
        # A parent read back is not cached on its way: the new head replaces it at once.
        parent = _EMPTY if head is None else self._cached(head.hash) or self._read_back(head.hash)
        # The task has moved on: its next call starts from the new head. A retry of this call reads
        # the parent back (it usually finds the call's recorded output first).
        chain = _Chain(parent.messages + tuple(messages), parent.size + len(data), parent.refs or bool(referenced))
        self._remember(ref.hash, chain, replaces=head)
        return ref

    def _cached(self, digest: str) -> _Chain | None:
        with self._lock:
            found = self._cache.get(digest)
            if found is not None:
                self._cache.move_to_end(digest)
            return found

    def _remember(self, digest: str, chain: _Chain, replaces: ContentRef | None = None) -> None:
        with self._lock:
            if replaces is not None and replaces.hash != digest:
                self._drop(replaces.hash)
            self._drop(digest)
            if chain.size > self._cache_limit:
                return  # larger than the whole cache: read back each time rather than evict every other
            while self._cache and self._cache_size + chain.size > self._cache_limit:
                self._drop(next(iter(self._cache)))
            self._cache[digest] = chain
            self._cache_size += chain.size

    def _drop(self, digest: str) -> None:
        dropped = self._cache.pop(digest, None)
        if dropped is not None:
            self._cache_size -= dropped.size

    def resolve(self, messages: tuple[Message, ...] | list[Message]) -> list[Message]:
        """The same messages with every stored body filled in: tool outputs held as references
        become their text, images (in messages and tool results) carry their bytes as base64."""
        return [self._resolve_message(m) if has_refs(m) else m for m in messages]

    def _resolve_message(self, message: Message) -> Message:
        content: list[Block] = []
        for block in message.content:
            if isinstance(block, ImageBlock):
                content.append(self._image(block))
            elif isinstance(block, ToolResultBlock):
                output = block.output
                if isinstance(output, ContentRef):
                    output = self.store.get(output).decode("utf-8", "replace")
                images = [self._image(i) for i in block.images] if block.images else block.images
                content.append(
                    ToolResultBlock(block.call_id, output, block.success, error=block.error, images=images)
                )
            else:
                content.append(block)
        return Message(role=message.role, content=content, origin=message.origin)

    def _image(self, block: ImageBlock) -> ImageBlock:
        data = base64.b64encode(self.store.get(block.source)).decode("ascii")
        return ImageBlock(block.source, data=data)


def _referenced(messages: list[Message]) -> list[str]:
    """Hashes of the stored bodies these messages point at."""
    found = []
    for message in messages:
        for block in message.content:
            if isinstance(block, ImageBlock):
                found.append(block.source.hash)
            elif isinstance(block, ToolResultBlock):
                if isinstance(block.output, ContentRef):
                    found.append(block.output.hash)
                found.extend(image.source.hash for image in block.images or ())
    return found


def has_refs(message: Message) -> bool:
    """Whether ``message`` holds a stored body that resolving it reads."""
    return any(
        isinstance(b, ImageBlock)
        or (isinstance(b, ToolResultBlock) and (isinstance(b.output, ContentRef) or b.images))
        for b in message.content
    )
