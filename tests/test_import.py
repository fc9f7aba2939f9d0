"""Importing an export into another installation (noeta import): its bodies go into that
installation's (empty) content store, hash-checked, and the task is addressable there by id —
finished as it finished, exported, replayed and forked by id — with no model asked and no tool run
by the import. Real dev server, a second content store of its own."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest

from noeta.cli import run
from noeta.client.client import AsyncClient
from noeta.client.imports import import_task
from noeta.client.options import Options
from noeta.errors import ExportFormatError, TaskAlreadyExistsError, TaskNotFoundError
from noeta.sdk.testing import FakeLLMProvider, load_task, replay
from tests.support import recorded
from tests.support.recorded import count
from tests.test_export_replay import SCRIPT, run_counting_task
from tests.test_fork import fixed_rest, outputs


async def test_an_import_is_addressable_by_id_and_forks_on_another_installation(
    client: AsyncClient, serve, settings, tmp_path: Path, task_queue: str
):
    from noeta.activities.registry import Registry
    from noeta.client.host import HostConfig
    from noeta.context.content_store import LocalContentStore
    from noeta.worker import build_worker

    source = await run_counting_task(client, serve, task_queue)
    export = await client.export(source)
    data = json.dumps(export).encode()
    laptop_store = LocalContentStore(tmp_path / "laptop")
    laptop = await AsyncClient.connect(HostConfig(settings=settings, content_store=laptop_store))
    runs_before = len(recorded.RUNS)

    task_id = await import_task(laptop.temporal, laptop.content_store, data, f"{source}-imported")
    assert task_id == f"{source}-imported"
    assert all(laptop_store.get(digest) == base64.b64decode(body["data"]) for digest, body in export["bodies"].items())
    # Finished as it finished, with the recorded result; its record is the export.
    assert (await laptop.result(task_id)).answer == "three counted"
    assert await laptop.export(task_id) == export
    report = replay([load_task(await laptop.export(task_id))], provider=FakeLLMProvider(responses=list(SCRIPT)))
    assert (report.turns, report.changed) == (4, ())
    assert len(recorded.RUNS) == runs_before  # the import ran nothing

    # Forked by id on the laptop, with a worker of its own on its own store.
    other = FakeLLMProvider(responder=fixed_rest)
    queue = f"{task_queue}-laptop"
    registry = Registry.of(tools=[count], providers={"other": other}, content_store=laptop_store)
    async with build_worker(laptop.temporal, registry, queue, workflow_failure_exception_types=[Exception]):
        fork = await laptop.fork(task_id, at_turn=3, options=Options(provider="other"), task_queue=queue)
        assert (await laptop.result(fork)).answer == "the other provider's answer"
    assert outputs(other.received_requests[0]) == ["counted 1", "counted 2"]
    assert len(recorded.RUNS) == runs_before + 1  # only the fork's own call ran

    # The id is taken now; a tampered export is refused before anything is stored or started.
    with pytest.raises(TaskAlreadyExistsError):
        await import_task(laptop.temporal, laptop.content_store, data, task_id)
    digest = next(iter(export["bodies"]))
    tampered = json.loads(data)
    tampered["bodies"][digest]["data"] = base64.b64encode(b"not the body").decode()
    with pytest.raises(ExportFormatError, match="does not match its hash"):
        await import_task(laptop.temporal, laptop.content_store, json.dumps(tampered).encode(), f"{source}-bad")
    with pytest.raises(TaskNotFoundError):
        await laptop.export(f"{source}-bad")


async def test_an_imported_failed_task_fails_as_recorded(client: AsyncClient, serve, settings, tmp_path: Path, task_queue):
    from noeta.errors import ProviderError

    provider = FakeLLMProvider(responses=[])  # the first model call fails: the script is empty
    async with serve(tools=[count], providers=[provider]):
        source = await client.start("fail", Options(provider=provider, allowed_tools=[count], max_retries=0), task_queue=task_queue)
        with pytest.raises(Exception) as recorded_failure:
            await client.result(source)
    data = json.dumps(await client.export(source)).encode()
    task_id = await import_task(client.temporal, client.content_store, data, f"{source}-imported")
    with pytest.raises(Exception) as imported_failure:
        await client.result(task_id)
    assert type(imported_failure.value) is type(recorded_failure.value)
    assert isinstance(imported_failure.value, ProviderError)  # the typed error, as recorded
    assert str(imported_failure.value) == str(recorded_failure.value)


async def test_cli_import(client: AsyncClient, serve, task_queue, settings, data_dir: Path, tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("TEMPORAL_ADDRESS", settings.temporal_address)
    monkeypatch.setenv("NOETA_HOME", str(data_dir))
    source = await run_counting_task(client, serve, task_queue)
    path = tmp_path / "task.json"
    path.write_text(json.dumps(await client.export(source)))

    capsys.readouterr()
    code = await asyncio.to_thread(run, ["import", str(path), "--task-id", f"{source}-cli"])
    out, err = capsys.readouterr()
    assert (code, out.strip()) == (0, f"{source}-cli"), err
    assert (await client.result(f"{source}-cli")).answer == "three counted"
    code = await asyncio.to_thread(run, ["replay", f"{source}-cli", "--provider", "tests.support.recorded:same"])
    out, _ = capsys.readouterr()
    assert code == 1 and "1 decision(s) changed" in out  # three_counts names the goal in its answer
    code = await asyncio.to_thread(run, ["import", str(tmp_path / "missing.json")])
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith("noeta: ConfigurationError: ")
