"""Images as task input: store the bytes once, pass an ImageBlock (a reference) around."""

from __future__ import annotations

import mimetypes
from pathlib import Path

from noeta.client.options import HostConfig
from noeta.context.content_store import ContentStore
from noeta.errors import ConfigurationError
from noeta.protocols.messages import ImageBlock

SUPPORTED = ("image/png", "image/jpeg", "image/gif", "image/webp")


def image(
    source: bytes | str | Path, media_type: str | None = None, content_store: ContentStore | None = None
) -> ImageBlock:
    """An ImageBlock for ``query(images=...)`` / ``Client.start(images=...)``: the bytes (or the
    file at ``source``) go to the content store the workers read (default: the local one)."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        data = path.read_bytes()
        media_type = media_type or mimetypes.guess_type(path.name)[0]
    else:
        data = source
    if media_type not in SUPPORTED:
        raise ConfigurationError(f"image media type must be one of {', '.join(SUPPORTED)}, got {media_type!r}")
    store = content_store or HostConfig().store()
    return ImageBlock(source=store.put(data, media_type))
