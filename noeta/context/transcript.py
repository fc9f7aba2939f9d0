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

from pydantic import TypeAdapter

from noeta.context.content_store import ContentStore, RetainingStore
from noeta.protocols.messages import (
    Block,
    ContentRef,
    ImageBlock,
    Message,
    ToolResultBlock,
)

NODE_MEDIA_TYPE = "application/vnd.noeta.transcript+json"
_MESSAGES = TypeAdapter(list[Message])


class TranscriptStore:
    """Reads and extends transcript chains; caches decoded chains per head (bounded). Thread-safe:
    activities call it from worker threads."""

    def __init__(self, store: ContentStore, cache_size: int = 256) -> None:
        self.store = store
        self._cache: OrderedDict[str, tuple[Message, ...]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()  # guards the cache only; store I/O runs outside it

    def load(self, head: ContentRef | None) -> tuple[Message, ...]:
        if head is None:
            return ()
        cached = self._cached(head.hash)
        if cached is not None:
            return cached
        # Walk back to the newest cached ancestor, then decode forward.
        nodes: list[list[Message]] = []
        digest: str | None = head.hash
        prefix: tuple[Message, ...] = ()
        while digest is not None:
            known = self._cached(digest)
            if known is not None:
                prefix = known
                break
            node = json.loads(self.store.get(digest))
            nodes.append(_MESSAGES.validate_python(node["messages"]))
            digest = node["parent"]
        messages = list(prefix)
        for chunk in reversed(nodes):
            messages.extend(chunk)
        result = tuple(messages)
        self._remember(head.hash, result)
        return result

    def append(self, head: ContentRef | None, messages: list[Message]) -> ContentRef:
        body = {
            "parent": head.hash if head else None,
            "messages": _MESSAGES.dump_python(messages, mode="json"),
        }
        data = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
        ref = self.store.put(data, NODE_MEDIA_TYPE)
        referenced = _referenced(messages)
        if referenced and isinstance(self.store, RetainingStore):
            self.store.claim(referenced)  # e.g. images a client stored: they belong to this task too
        self._remember(ref.hash, self.load(head) + tuple(messages))
        return ref

    def _cached(self, digest: str) -> tuple[Message, ...] | None:
        with self._lock:
            found = self._cache.get(digest)
            if found is not None:
                self._cache.move_to_end(digest)
            return found

    def _remember(self, digest: str, messages: tuple[Message, ...]) -> None:
        with self._lock:
            self._cache[digest] = messages
            self._cache.move_to_end(digest)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def resolve(self, messages: tuple[Message, ...] | list[Message]) -> list[Message]:
        """The same messages with every stored body filled in: tool outputs held as references
        become their text, images (in messages and tool results) carry their bytes as base64."""
        return [self._resolve_message(m) if _has_refs(m) else m for m in messages]

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


def _has_refs(message: Message) -> bool:
    return any(
        isinstance(b, ImageBlock)
        or (isinstance(b, ToolResultBlock) and (isinstance(b.output, ContentRef) or b.images))
        for b in message.content
    )
