"""Where the history recorders run: a fresh embedded dev server in a temporary folder, and a client
of it with a local content store of its own (``python -m tests.histories.record_*``)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.embedded import EmbeddedServer
from noeta.client.options import HostConfig
from noeta.context.content_store import LocalContentStore


@contextlib.asynccontextmanager
async def recording_client() -> AsyncIterator[tuple[EmbeddedServer, AsyncClient, LocalContentStore]]:
    """``async with recording_client() as (server, client, store):`` — gone when the block ends."""
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedServer(Path(tmp) / "temporal", headless=True).start()
        try:
            store = LocalContentStore(Path(tmp) / "content")
            client = await AsyncClient.connect(
                HostConfig(settings=Settings(temporal_address=server.address, home=Path(tmp)), content_store=store)
            )
            yield server, client, store
        finally:
            server.stop()
