"""Content-addressed storage for large bodies (sha256 -> bytes).

History carries :class:`ContentRef` values; the bytes live here. Client and worker must open the
same store: the local-directory store is the embedded default (one host), a PostgreSQL store serves
workers on several hosts.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Protocol, runtime_checkable

from noeta.protocols.messages import ContentRef


class ContentNotFoundError(KeyError):
    """The store has no body with that hash: client and worker are not sharing one store."""


@runtime_checkable
class ContentStore(Protocol):
    def put(self, data: bytes, media_type: str = "text/plain") -> ContentRef: ...

    def get(self, ref: ContentRef | str) -> bytes: ...


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class LocalContentStore:
    """One file per body under ``root/ab/cdef...``; writes are atomic (temp file + rename)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"LocalContentStore({str(self.root)!r})"

    def _path(self, digest: str) -> Path:
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"not a sha256 hex digest: {digest!r}")
        return self.root / digest[:2] / digest[2:]

    def put(self, data: bytes, media_type: str = "text/plain") -> ContentRef:
        digest = content_hash(data)
        path = self._path(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        return ContentRef(hash=digest, size=len(data), media_type=media_type)

    def get(self, ref: ContentRef | str) -> bytes:
        digest = ref.hash if isinstance(ref, ContentRef) else ref
        try:
            return self._path(digest).read_bytes()
        except FileNotFoundError:
            raise ContentNotFoundError(
                f"content {digest[:12]}… is not in {self!r}: client and worker must use the same "
                "content store (NOETA_HOME / NOETA_CONTENT_DIR)"
            ) from None
