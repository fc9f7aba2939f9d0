"""Local step records: each output appended to its task's log, whole or ignored, first wins,
sealed when the store is; records of earlier releases (a ref into the store) still read."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from noeta.context.content_store import LocalContentStore
from noeta.context.step_keys import sha256_hex as _sha256
from noeta.context.step_records import (
    LocalStepRecords,
    MemoryStepRecords,
    StepOutputs,
    stored_step_records,
)
from noeta.errors import ContentIntegrityError
from noeta.security.keys import parse_keys
from noeta.security.sealed_bodies import BodyCipher

KEY = "task-1/run-1/model-1"
TOOL_KEY = "task-1/run-1/1"


def local(tmp_path: Path, sealed: bool = False) -> tuple[LocalContentStore, LocalStepRecords]:
    keys = parse_keys(["k1:" + "A" * 43 + "="]) if sealed else None
    store = LocalContentStore(tmp_path / "content", cipher=BodyCipher(keys) if keys else None)
    records = stored_step_records(store)
    assert isinstance(records, LocalStepRecords)
    return store, records


def files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_a_tasks_outputs_go_to_one_log_beside_the_store_and_no_body_in_it(tmp_path):
    store, records = local(tmp_path)
    StepOutputs(records, store).put(KEY, b'{"answer": 42}')
    StepOutputs(records, store).put(TOOL_KEY, b'{"output": "5"}')
    assert StepOutputs(records, store).get(KEY) == b'{"answer": 42}'
    assert StepOutputs(records, store).get(TOOL_KEY) == b'{"output": "5"}'
    assert StepOutputs(records, store).get("task-1/run-1/model-2") is None
    assert [p.suffix for p in files(records.root)] == [".log"]
    assert [p for p in files(store.root) if records.root not in p.parents] == []  # no content body
    # Another task: a log of its own; releasing one task leaves the other's.
    StepOutputs(records, store).put("task-2/run-1/1", b"other")
    assert len(files(records.root)) == 2
    assert records.release(["task-1"], datetime.now(timezone.utc)) == 2
    assert StepOutputs(records, store).get(KEY) is None
    assert StepOutputs(records, store).get("task-2/run-1/1") == b"other"


def test_the_first_record_of_a_key_wins(tmp_path):
    store, records = local(tmp_path)
    StepOutputs(records, store).put(KEY, b"first")
    StepOutputs(records, store).put(KEY, b"second")
    assert StepOutputs(records, store).get(KEY) == b"first"


@pytest.mark.parametrize("cut", [1, 20, 60, -1])
def test_an_entry_cut_short_reads_as_none_and_later_entries_still_read(tmp_path, cut):
    store, records = local(tmp_path)
    StepOutputs(records, store).put(TOOL_KEY, b'{"kept": true}')
    [log] = files(records.root)
    whole = log.read_bytes()
    StepOutputs(records, store).put(KEY, b"a finished step's output")
    log.write_bytes(log.read_bytes()[: len(whole) + (cut if cut > 0 else len(log.read_bytes()) - len(whole) + cut)])
    assert StepOutputs(records, store).get(KEY) is None  # the step runs again...
    assert StepOutputs(records, store).get(TOOL_KEY) == b'{"kept": true}'  # an earlier entry is whole
    StepOutputs(records, store).put(KEY, b"the retry's output")  # ...its output appended after the torn one
    assert StepOutputs(records, store).get(KEY) == b"the retry's output"
    StepOutputs(records, store).put("task-1/run-1/2", b"and the next step's")
    assert StepOutputs(records, store).get("task-1/run-1/2") == b"and the next step's"


def test_with_an_encrypted_store_the_record_is_sealed_and_bound_to_its_key(tmp_path):
    store, records = local(tmp_path, sealed=True)
    StepOutputs(records, store).put(KEY, b"secret output")
    [log] = files(records.root)
    assert b"secret output" not in log.read_bytes()
    assert StepOutputs(records, store).get(KEY) == b"secret output"
    # The entry relabelled as another step's does not open: the key is the sealing's associated data.
    other = "task-1/run-1/model-9"
    log.write_bytes(log.read_bytes().replace(_sha256(KEY).encode(), _sha256(other).encode()))
    with pytest.raises(ContentIntegrityError, match="fails authentication under key 'k1'"):
        StepOutputs(records, store).get(other)


def test_a_record_of_an_earlier_release_points_into_the_store_still_reads_and_wins(tmp_path):
    store, records = local(tmp_path)
    records.put(KEY, store.put(b"recorded by an older worker", "application/json"))
    assert StepOutputs(records, store).get(KEY) == b"recorded by an older worker"
    StepOutputs(records, store).put(KEY, b"a newer attempt")  # first wins across formats too
    assert StepOutputs(records, store).get(KEY) == b"recorded by an older worker"


def test_in_process_records_hold_the_output_too():
    records, store = MemoryStepRecords(), None
    StepOutputs(records, store).put(KEY, b"x")  # type: ignore[arg-type]  (no store needed)
    StepOutputs(records, store).put(KEY, b"y")  # type: ignore[arg-type]
    assert StepOutputs(records, store).get(KEY) == b"x"  # type: ignore[arg-type]


def test_an_absent_record_is_told_by_stat_and_another_writer_is_never_missed(tmp_path):
    store, records = local(tmp_path)
    other_process = LocalStepRecords(records.root, store)  # a second worker on the same disk
    assert records.known_absent(KEY)  # no log yet
    records.put_output(TOOL_KEY, b"tool output")
    assert records.known_absent(KEY)  # its own append: the log is as it left it
    assert not records.known_absent(TOOL_KEY)  # recorded: the lookup reads it
    other_process.put_output(KEY, b"model output")
    assert not records.known_absent(KEY)  # the log grew under it: read again
    assert records.get_output(KEY) == b"model output"
    assert not records.known_absent(KEY)
    assert records.known_absent("task-1/run-1/model-2")  # read since: known again
    assert StepOutputs(records, store).known_absent("task-1/run-1/model-2")


def test_a_record_of_an_earlier_release_is_never_known_absent(tmp_path):
    store, records = local(tmp_path)
    records.put(KEY, store.put(b"old release output"))  # a file of its own, no log
    assert not records.known_absent(KEY)
    assert StepOutputs(records, store).get(KEY) == b"old release output"


def test_records_without_a_cheap_absence_check_always_read():
    assert not StepOutputs(MemoryStepRecords(), object()).known_absent(KEY)  # type: ignore[arg-type]
