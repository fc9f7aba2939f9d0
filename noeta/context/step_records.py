"""Finished steps by key: how a retried attempt finds that its step already ran.

Temporal runs an activity at least once: when a step finishes but its completion never reaches
the server (the server is down, the worker is killed in between), the server times the attempt
out and runs it again. So a worker records each finished model or tool call under its step key
(unique per logical call, stable across attempts; see ``InvokeToolInput.idempotency_key``)
*before* reporting it, and a retried attempt that finds a record returns the recorded result
instead of running the step again. What is left is the instant between a step's end and its
record: a worker killed exactly there runs the step again, which is why tools with side effects
still get the key to de-duplicate on their side.

A local record holds the step's output itself (sealed with the store's key when the store is
encrypted), appended to its task's log. Other backends map a key to a :class:`ContentRef` whose
body lives in the content store (and so gets whatever protection that store has). Backends follow
the content store: a directory beside a local store's bodies, a table beside a PostgreSQL store's.
Any other store gets an in-process record (de-duplication within one worker process only) unless
the worker's registry names a ``step_records`` of its own. This module holds what every backend
shares and the choice between them; the backends are :mod:`noeta.context.local_step_records` and
:mod:`noeta.context.postgres_step_records` (both importable from here too).

Records are filed by task (a step key is ``{task_id}/{run_id}/{step}``, see
``noeta.workflows.steps.step_key``) so that retention removes a task's records together with its
bodies: once the bodies are gone a record would point at nothing. A record is only ever read by a
retry of its own step, which Temporal runs within that step's timeouts, so records older than the
retention period that cannot be told apart by task (written before records were filed by task)
are removed by age.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Protocol, runtime_checkable

from noeta.context.content_store import ContentStore, LocalContentStore
from noeta.context.local_step_records import LocalStepRecords
from noeta.context.postgres_step_records import PostgresStepRecords
from noeta.context.step_keys import task_of
from noeta.context.store_failures import typed_failures
from noeta.protocols.messages import ContentRef

logger = logging.getLogger(__name__)


@runtime_checkable
class StepRecords(Protocol):
    """Where a finished step's result is recorded by its step key, so that a retried attempt of the
    step finds it."""
    def get(self, key: str) -> ContentRef | None:
        """The reference recorded for ``key``, or None."""

    def put(self, key: str, ref: ContentRef) -> None:
        """Record ``ref`` for ``key``; the first record of a key wins."""
        ...


@runtime_checkable
class OutputRecords(Protocol):
    """Records that hold a step's output themselves (no content-store body to write and read)."""

    def get_output(self, key: str) -> bytes | None:
        """The output recorded for ``key``, or None."""

    def put_output(self, key: str, data: bytes) -> None:
        """Record ``data`` for ``key``; the first record of a key wins."""
        ...


@runtime_checkable
class ReleasingStepRecords(StepRecords, Protocol):
    """Step records that retention can clear, task by task."""
    def release(self, task_ids: Collection[str], stored_before: datetime) -> int:
        """Delete the records of these tasks (and unfiled ones written before ``stored_before``);
        returns how many went."""
        ...


class StepOutputs:
    """Steps' recorded outputs by key, over any :class:`StepRecords`: kept by the records
    themselves when they can (:class:`OutputRecords`), else a content-store body each. Which of
    the two is decided once, not on every step (a runtime protocol check costs microseconds)."""

    def __init__(self, records: StepRecords, store: ContentStore) -> None:
        """``records`` keep the keys; ``store`` holds the outputs when the records cannot."""
        self.records, self.store = records, store
        self._own = records if isinstance(records, OutputRecords) else None
        self._known_absent: Callable[[str], bool] | None = getattr(records, "known_absent", None)

    def known_absent(self, key: str) -> bool:
        """Whether step ``key`` surely has no record, told without reading any (local records on
        this machine's disk: a ``stat``); False whenever that cannot be told cheaply."""
        if self._known_absent is None:
            return False
        try:
            return self._known_absent(key)
        except OSError:  # the read that follows reports it, typed
            return False

    def get(self, key: str) -> bytes | None:
        """The output recorded for step ``key``, or None; ContentStoreError when the records cannot
        be read."""
        with typed_failures(self.records, f"read the record of step {key}"):
            if self._own is not None:
                return self._own.get_output(key)
            ref = self.records.get(key)
        return None if ref is None else self.store.get(ref)

    def put(self, key: str, data: bytes) -> None:
        """Record ``data`` as step ``key``'s output (the first record of a key wins);
        ContentStoreError when it cannot be written."""
        with typed_failures(self.records, f"record step {key}"):
            if self._own is not None:
                self._own.put_output(key, data)
            else:
                self.records.put(key, self.store.put(data, "application/json"))


class MemoryStepRecords:
    """Records within one process: a worker restarted elsewhere does not see them."""

    def __init__(self) -> None:
        """Starts empty."""
        self._refs: dict[str, ContentRef] = {}
        self._outputs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> ContentRef | None:
        """The reference recorded for ``key``, or None."""
        return self._refs.get(key)

    def put(self, key: str, ref: ContentRef) -> None:
        """Record ``ref`` for ``key`` unless it has one already."""
        with self._lock:
            self._refs.setdefault(key, ref)

    def get_output(self, key: str) -> bytes | None:
        """The output recorded for ``key``, or None."""
        return self._outputs.get(key)

    def put_output(self, key: str, data: bytes) -> None:
        """Record ``data`` for ``key`` unless it has one already."""
        with self._lock:
            self._outputs.setdefault(key, data)


#: Directory, beside a local store's two-hex-digit body directories, that holds the records.
LOCAL_DIR = "steps"


def stored_step_records(store: ContentStore) -> ReleasingStepRecords | None:
    """The records that live beside ``store``, or None for a store with none beside it."""
    if isinstance(store, LocalContentStore):
        return LocalStepRecords(store.root / LOCAL_DIR, store)
    dsn, table = getattr(store, "dsn", None), getattr(store, "table", None)
    if type(store).__name__ == "PostgresContentStore" and isinstance(dsn, str) and isinstance(table, str):
        return PostgresStepRecords(dsn, f"{table}_steps")
    return None


def step_records_for(store: ContentStore) -> StepRecords:
    """The records that live beside ``store`` (see the module docstring)."""
    records = stored_step_records(store)
    if records is not None:
        return records
    logger.warning(
        "content store %r has no step records; finished steps are recorded in this worker process "
        "only (give the Registry step_records= to share them between workers)",
        store,
    )
    return MemoryStepRecords()


__all__ = [
    "LOCAL_DIR",
    "LocalStepRecords",
    "MemoryStepRecords",
    "OutputRecords",
    "PostgresStepRecords",
    "ReleasingStepRecords",
    "StepOutputs",
    "StepRecords",
    "step_records_for",
    "stored_step_records",
    "task_of",
]
