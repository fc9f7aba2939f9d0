"""Local step records hold the step's output in one file: whole or ignored, first wins, sealed when
the store is, and records of earlier releases (a ref into the store) still read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from noeta.context.content_store import LocalContentStore
from noeta.context.step_records import (
    LocalStepRecords,
    MemoryStepRecords,
    record_output,
    recorded_output,
    stored_step_records,
)
from noeta.errors import EncryptionKeyError
from noeta.security.keys import parse_keys
from noeta.security.sealed_bodies import BodyCipher

KEY = "task-1/run-1/model-1"


def local(tmp_path: Path, sealed: bool = False) -> tuple[LocalContentStore, LocalStepRecords]:
    keys = parse_keys(["k1:" + "A" * 43 + "="]) if sealed else None
    store = LocalContentStore(tmp_path / "content", cipher=BodyCipher(keys) if keys else None)
    records = stored_step_records(store)
    assert isinstance(records, LocalStepRecords)
    return store, records


def files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_an_output_is_one_file_beside_the_store_and_no_body_in_it(tmp_path):
    store, records = local(tmp_path)
    record_output(records, store, KEY, b'{"answer": 42}')
    assert recorded_output(records, store, KEY) == b'{"answer": 42}'
    assert len(files(records.root)) == 1
    assert [p for p in files(store.root) if records.root not in p.parents] == []  # no content body
    assert recorded_output(records, store, "task-1/run-1/model-2") is None


def test_the_first_record_of_a_key_wins(tmp_path):
    store, records = local(tmp_path)
    record_output(records, store, KEY, b"first")
    record_output(records, store, KEY, b"second")
    assert recorded_output(records, store, KEY) == b"first"


@pytest.mark.parametrize("cut", [0, 10, -1])
def test_a_record_cut_short_reads_as_none_and_the_next_attempt_replaces_it(tmp_path, cut):
    store, records = local(tmp_path)
    record_output(records, store, KEY, b"a finished step's output")
    [path] = files(records.root)
    path.write_bytes(path.read_bytes()[:cut])  # a crash mid-write (0: created, nothing written)
    assert recorded_output(records, store, KEY) is None  # the step runs again...
    record_output(records, store, KEY, b"the retry's output")  # ...and its output is recorded
    assert recorded_output(records, store, KEY) == b"the retry's output"


def test_with_an_encrypted_store_the_record_is_sealed_and_bound_to_its_key(tmp_path):
    store, records = local(tmp_path, sealed=True)
    record_output(records, store, KEY, b"secret output")
    [path] = files(records.root)
    assert b"secret output" not in path.read_bytes()
    assert recorded_output(records, store, KEY) == b"secret output"
    # Moved under another key, the record does not open (the key is the sealing's associated data).
    other = "task-1/run-1/model-9"
    target = records._path(other)
    os.makedirs(target.parent, exist_ok=True)
    target.write_bytes(path.read_bytes())
    with pytest.raises(EncryptionKeyError, match="failed authentication"):
        recorded_output(records, store, other)


def test_a_record_of_an_earlier_release_points_into_the_store_and_still_reads(tmp_path):
    store, records = local(tmp_path)
    records.put(KEY, store.put(b"recorded by an older worker", "application/json"))
    assert recorded_output(records, store, KEY) == b"recorded by an older worker"
    record_output(records, store, KEY, b"a newer attempt")  # first wins across formats too
    assert recorded_output(records, store, KEY) == b"recorded by an older worker"


def test_in_process_records_hold_the_output_too():
    records, store = MemoryStepRecords(), None
    record_output(records, store, KEY, b"x")  # type: ignore[arg-type]  (no store needed)
    record_output(records, store, KEY, b"y")  # type: ignore[arg-type]
    assert recorded_output(records, store, KEY) == b"x"  # type: ignore[arg-type]
