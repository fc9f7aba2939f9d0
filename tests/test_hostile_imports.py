"""Imports are as strict as starts: a hostile export file gets a typed error before anything is
stored or started, and an import keeps only the bodies its history refers to. A real export of a
real task (dev server), then edited the way an attacker would, imported into an empty store."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from pathlib import Path

import pytest

from noeta.client.client import AsyncClient
from noeta.client.imports import import_task
from noeta.context.content_store import LocalContentStore
from noeta.errors import ConfigurationError, ExportFormatError, TaskNotFoundError
from tests.test_export_replay import run_counting_task


def files(root: Path) -> list[Path]:
    """The bodies written under ``root`` (a store's own lock file is not one)."""
    return [p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")] if root.exists() else []


@pytest.fixture
async def exported(client: AsyncClient, serve, task_queue: str) -> dict:
    return await client.export(await run_counting_task(client, serve, task_queue))


async def test_a_hostile_task_id_is_refused_as_a_start_refuses_it(
    client: AsyncClient, exported: dict, tmp_path: Path, settings, data_dir: Path, capsys, monkeypatch
):
    store = LocalContentStore(tmp_path / "store")
    data = json.dumps(exported).encode()
    with pytest.raises(ConfigurationError, match=r"task_id '\.\./\.\./\.\./x' is not allowed"):
        await import_task(client.temporal, store, data, "../../../x")
    renamed = json.dumps({**exported, "task_id": "../../../x"}).encode()  # the file's own id
    with pytest.raises(ConfigurationError, match=r"task_id '\.\./\.\./\.\./x' is not allowed"):
        await import_task(client.temporal, store, renamed)
    with pytest.raises(ConfigurationError):  # what a start says of the same id
        await client.start("x", task_id="../../../x")
    assert files(tmp_path / "store") == []
    with pytest.raises(TaskNotFoundError):
        await client.describe("../../../x")
    # The command line: one line naming the typed error, exit code 2, nothing stored.
    from noeta.cli import run

    monkeypatch.setenv("TEMPORAL_ADDRESS", settings.temporal_address)
    monkeypatch.setenv("NOETA_HOME", str(data_dir))
    path = tmp_path / "task.json"
    path.write_bytes(data)
    before = files(data_dir)
    capsys.readouterr()
    code = await asyncio.to_thread(run, ["import", str(path), "--task-id", "../../../x"])
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith("noeta: ConfigurationError: task_id '../../../x' is not allowed")
    assert files(data_dir) == before


async def test_an_over_deep_export_is_a_format_error_not_a_recursion_error(client: AsyncClient, tmp_path: Path):
    store = LocalContentStore(tmp_path / "store")
    deep = b'{"format": "noeta-task-export/1", "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    with pytest.raises(ExportFormatError, match="nests deeper"):
        await import_task(client.temporal, store, deep, "deep-import")
    assert files(tmp_path / "store") == []


async def test_only_the_bodies_the_history_refers_to_are_stored(client: AsyncClient, exported: dict, tmp_path: Path):
    referenced = set(exported["bodies"])
    padded = json.loads(json.dumps(exported))
    for n in range(100_000):  # valid bodies, each under its true hash, that nothing refers to
        raw = f"unreferenced body {n}".encode()
        padded["bodies"][hashlib.sha256(raw).hexdigest()] = {"media_type": "text/plain", "data": base64.b64encode(raw).decode()}
    store = LocalContentStore(tmp_path / "store")
    task_id = await import_task(client.temporal, store, json.dumps(padded).encode(), f"{exported['task_id']}-padded")
    assert (await client.result(task_id)).answer == "three counted"
    kept = {p.parent.name + p.name for p in files(tmp_path / "store")}  # a body's path spells its hash
    assert len(files(tmp_path / "store")) == len(referenced) + 1  # the referenced bodies and the export itself
    assert referenced < kept
    # What is kept of the file is the export without the padding: read back, it is the original.
    # The session's client reads this store for a moment: other tests share it, so it gets its own back.
    own = client.content_store
    client.content_store = store
    try:
        assert await client.export(task_id) == exported
    finally:
        client.content_store = own
