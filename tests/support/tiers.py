"""The fast tier: every test that needs no Temporal server and starts no process.

A test is marked ``fast`` at collection when it uses none of :data:`SERVER_FIXTURES` (directly or
through another fixture: ``item.fixturenames`` is the whole closure, so ``client``, ``serve`` and
``settings`` count through ``temporal_server``) and is not marked ``server`` (a test that starts a
process itself: the CLI, a worker, a tool). ``python -m pytest -m fast -n 0`` runs the tier.

The marker is checked, not trusted: :class:`SpawnCheck` is an audit hook (``sys.addaudithook``,
nothing patched) that refuses any process start while a fast test runs and fails that test, so a
test that starts one without saying so is caught the first time it runs in the tier.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import pytest

#: Fixtures that start the Temporal dev server or another process. Every fixture that needs a
#: server (``settings``, ``host``, ``client``, ``serve``...) depends on ``temporal_server``.
SERVER_FIXTURES = frozenset({"temporal_server"})

#: Audit events (PEP 578) raised when Python is about to start a process.
SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.posix_spawn", "os.spawn", "os.exec", "os.fork", "os.forkpty"})


def is_fast(item: pytest.Item) -> bool:
    """Whether ``item`` belongs to the fast tier: no server fixture, no ``server`` marker."""
    return item.get_closest_marker("server") is None and not SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ()))


def mark_fast(items: Iterable[pytest.Item]) -> None:
    """Add the ``fast`` marker to each test of the fast tier (before ``-m`` selects)."""
    for item in items:
        if is_fast(item):
            item.add_marker(pytest.mark.fast)


class SpawnCheck:
    """An audit hook that refuses to start a process while a fast test runs, and remembers it.

    Raising from the hook stops the start itself (``Popen`` raises before anything runs); the
    remembered start fails the test even where the test catches that error."""

    def __init__(self) -> None:
        self.running: str | None = None
        """The node id of the fast test running now (None: none, or one that is not fast)."""
        self.spawned: dict[str, list[str]] = {}
        """What each fast test tried to start, by node id."""

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        """The audit hook: refuse a process start during a fast test."""
        test = self.running
        if test is None or event not in SPAWN_EVENTS:
            return
        what = f"{event} {_command(args)}"
        self.spawned.setdefault(test, []).append(what)
        raise RuntimeError(f"{test} is in the fast tier but starts a process ({what}): mark it @pytest.mark.server")

    def install(self) -> SpawnCheck:
        """Add the hook to this process (an audit hook cannot be removed; it stays idle between fast tests)."""
        sys.addaudithook(self)
        return self

    def failure(self, nodeid: str) -> str | None:
        """Why the fast test ``nodeid`` fails the check, or None."""
        spawned = self.spawned.pop(nodeid, None)
        if not spawned:
            return None
        return f"a fast test started a process (mark it @pytest.mark.server): {'; '.join(spawned)}"


def _command(args: tuple[Any, ...]) -> str:
    # subprocess.Popen's event carries (executable, args, cwd, env); the others the path or command.
    if not args:
        return ""
    command = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else args[0]
    text = " ".join(map(str, command)) if isinstance(command, (list, tuple)) else str(command)
    return text[:200]
