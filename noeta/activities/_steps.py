"""The outputs of finished model and tool calls, kept so that a retried attempt returns what an
earlier attempt finished instead of running the step again.

An attempt can finish its work and still fail to report it (its worker dies between the two, or the
completion never reaches the server). The next attempt of the same step (same step key) finds the
output recorded here and returns it, marked ``from_record``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from pydantic import TypeAdapter

from noeta.activities._attempts import AttemptLedger
from noeta.activities._store_writes import read_stored
from noeta.activities._threads import ThreadPool
from noeta.context.step_records import StepOutputs
from noeta.protocols.activity_io import CallModelOutput, CompactContextOutput, InvokeToolOutput

#: A step whose finished output is recorded, so that a retried attempt returns it.
Step = TypeVar("Step", CallModelOutput, InvokeToolOutput, CompactContextOutput)


class FinishedSteps:
    """Records of finished steps by step key, read and written through ``io_pool``'s threads (the
    records live beside the content store)."""

    def __init__(self, outputs: StepOutputs, io_pool: ThreadPool) -> None:
        self._outputs = outputs
        self._io_pool = io_pool

    async def earlier(
        self, key: str, ledger: AttemptLedger, adapter: TypeAdapter[Step], *, may_have_run: bool = False
    ) -> Step | None:
        """What an earlier attempt of step ``key`` recorded when it finished, if its completion
        never reached Temporal: the step is not run again. None on an ordinary activity's first
        attempt, which Temporal schedules only once, unless ``may_have_run`` (it may have run as a
        local activity before). A local activity's attempt number says nothing of that: a workflow
        task lost with its worker takes its chain of local calls with it, and the next worker runs
        each again from attempt 1, so a local call always asks."""
        if not key or (ledger.attempt == 1 and not ledger.local and not may_have_run):
            return None
        if self._outputs.known_absent(key):  # the usual answer, without a trip to an I/O thread
            return None
        recorded: Step | None = await read_stored(ledger, self._io_pool.run(self._read, key, adapter, label="_recorded"))
        if recorded is None:
            return None
        return dataclasses.replace(recorded, attempt=ledger.attempt, retried=ledger.earlier, from_record=True)

    def record(self, key: str, adapter: TypeAdapter[Any], output: Any) -> None:
        """Record step ``key``'s finished output (on an I/O thread: it writes to the store).
        A step without a key is not recorded."""
        if key:
            self._outputs.put(key, adapter.dump_json(output))

    def recorded(self, key: str, adapter: TypeAdapter[Any]) -> Any:
        """What was recorded under ``key`` (None: nothing); reads the store, so call it on an I/O
        thread. For parts of a step recorded before the step finished (a compaction's summary)."""
        return self._read(key, adapter)

    def _read(self, key: str, adapter: TypeAdapter[Any]) -> Any:
        data = self._outputs.get(key)
        return None if data is None else adapter.validate_json(data)
