"""How the tests start their Temporal dev servers."""

from __future__ import annotations

import subprocess
from pathlib import Path

from noeta.client.client import connect_temporal, registered_search_attributes
from noeta.client.config import Settings
from noeta.client.embedded import DATABASE_FILE, free_port, temporal_binary
from noeta.protocols.names import BASE_SEARCH_ATTRIBUTES, SEARCH_ATTRIBUTES

#: A test server's SQLite file is scratch: without an fsync per write the server needs about a
#: third less CPU and half the wall time per task. Writes still reach the file when the server
#: stops or is killed (only a machine crash could lose them), so restarts keep their tasks.
SERVER_ARGS = ("--sqlite-pragma", "synchronous=OFF")


async def make_older_release_database(home: Path) -> set[str]:
    """The embedded server's database under ``home`` as a release before NoetaCostUSD left it:
    made by a dev server given only the first release's search attributes, with no record of
    them in the data directory. Returns the search attributes that server had."""
    data = home / "temporal"
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    old = subprocess.Popen(
        [temporal_binary(), "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
         "--db-filename", str(data / DATABASE_FILE), "--log-level", "error",
         *[arg for name in BASE_SEARCH_ATTRIBUTES for arg in ("--search-attribute", f"{name}={SEARCH_ATTRIBUTES[name]}")]],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:  # once it serves, its namespace and attributes are in the database
        temporal, _ = await connect_temporal(Settings(temporal_address=f"127.0.0.1:{port}", home=home))
        return await registered_search_attributes(temporal)
    finally:
        old.terminate()
        old.wait(30)
