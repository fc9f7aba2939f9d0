"""How a step's record is addressed and written: the task a step key belongs to, a key's digest
and a :class:`ContentRef` as the records store it (shared by every kind of step records)."""

from __future__ import annotations

import hashlib
import json

from noeta.protocols.messages import ContentRef


def task_of(key: str) -> str | None:
    """The task a step key belongs to, or None for a key not made by ``step_key``."""
    head, _, step = key.rpartition("/")
    task_id, _, run_id = head.rpartition("/")
    return task_id if task_id and run_id and step else None


def ref_json(ref: ContentRef) -> bytes:
    """``ref`` as a record stores it (JSON)."""
    return json.dumps({"hash": ref.hash, "size": ref.size, "media_type": ref.media_type}).encode()


def sha256_hex(text: str) -> str:
    """The sha256 of ``text`` in hex (how keys and task ids name files)."""
    return hashlib.sha256(text.encode()).hexdigest()


def ref_from_json(data: bytes) -> ContentRef:
    """The ContentRef a record stored with :func:`ref_json`."""
    raw = json.loads(data)
    return ContentRef(hash=raw["hash"], size=int(raw["size"]), media_type=raw["media_type"])


__all__ = ["ref_from_json", "ref_json", "sha256_hex", "task_of"]
