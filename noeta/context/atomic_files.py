"""Writing a new file atomically, cheaply: the local content store writes one per agent step.

A temporary name of our own (process, thread and a counter: unique without ``mkstemp``'s random
retries), ``O_EXCL`` so a stale one is never reused, then ``os.replace``. Directories already made
are remembered, so a write costs one ``stat`` less. Files are private to the owner (0600), as
``mkstemp`` made them. On this project's machines a file created costs the worker from 0.03 to
1 ms of CPU (kernel time, varying with the disk), a large share of a step's CPU: step records are
appended to a log instead (noeta.context.step_records).
"""

from __future__ import annotations

import itertools
import os
import threading

_counter = itertools.count()
_made_dirs: set[str] = set()
#: Bound on the directories remembered: callers may write into a directory per task (records of
#: earlier releases were filed so), and a worker runs tasks without end. Forgetting costs one
#: ``makedirs`` per directory again, nothing else.
_MADE_DIRS_LIMIT = 4096


def write_new(path: str, data: bytes, *, durable: bool = False) -> None:
    """Write ``data`` to ``path`` (replacing it if present) so readers see all of it or nothing.

    ``durable``: flush the data to disk before the rename, for a file whose loss in a power cut
    costs more than an fsync (a login's tokens); content-store blobs can be written again."""
    directory = os.path.dirname(path)
    if directory not in _made_dirs:
        os.makedirs(directory, exist_ok=True)
        if len(_made_dirs) >= _MADE_DIRS_LIMIT:
            _made_dirs.clear()
        _made_dirs.add(directory)
    tmp = f"{directory}/.tmp-{os.getpid()}-{threading.get_ident()}-{next(_counter)}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileNotFoundError:  # the directory was removed since (a test's temp dir, an operator)
        _made_dirs.discard(directory)
        os.makedirs(directory, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
