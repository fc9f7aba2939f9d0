"""The Temporal server a benchmark runs against: a headless dev server (Temporal's CLI, as
``noeta dev`` starts it) in a temporary home that is removed afterwards, so every run starts from
an empty history store."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from noeta.client.config import Settings
from noeta.client.embedded import EmbeddedServer
from noeta.client.options import HostConfig


@contextlib.contextmanager
def embedded_server() -> Iterator[tuple[str, Path]]:
    """``with embedded_server() as (address, home):`` — a dev server for the block: its address
    and a temporary home directory (the content store's too), both gone afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedServer(Path(tmp) / "temporal", headless=True).start()
        try:
            yield server.address, Path(tmp)
        finally:
            server.stop()


def host_at(address: str, home: Path) -> HostConfig:
    """The host configuration of a client of the Temporal server at ``address`` with ``home``."""
    return HostConfig(settings=Settings(temporal_address=address, home=home))
