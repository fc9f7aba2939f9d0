"""How the tests start their Temporal dev servers."""

from __future__ import annotations

#: A test server's SQLite file is scratch: without an fsync per write the server needs about a
#: third less CPU and half the wall time per task. Writes still reach the file when the server
#: stops or is killed (only a machine crash could lose them), so restarts keep their tasks.
SERVER_ARGS = ("--sqlite-pragma", "synchronous=OFF")
