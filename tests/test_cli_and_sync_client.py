"""The CLI and the synchronous Client, end to end against the test server."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from noeta.client.client import AsyncClient
from noeta.client.messages import AssistantMessage, Result, UserMessage
from noeta.client.options import Options
from noeta.client.sync import Client
from noeta.sdk.testing import FakeLLMProvider
from tests.support.scripts import say
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[1]


def noeta(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "noeta.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def cli_env(settings, data_dir: Path, task_queue: str) -> dict[str, str]:
    return {
        **os.environ,
        "TEMPORAL_ADDRESS": settings.temporal_address,
        "NOETA_HOME": str(data_dir),
        "NOETA_TASK_QUEUE": task_queue,
        "PYTHONPATH": str(ROOT),
    }


@pytest.mark.slow
def test_run_then_inspect_with_the_cli(cli_env: dict[str, str]):
    run = noeta(cli_env, "run", "what is 20 + 22?", "--registry", "tests.support.registry:cli_registry")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "the answer is 42\n"
    task_id = run.stderr.split("task ")[1].split()[0]

    messages = noeta(cli_env, "messages", task_id)
    assert messages.stdout.splitlines() == [
        "user      │ what is 20 + 22?",
        'tool call │ add({"a": 20, "b": 22}) [c1]',
        "tool ok   │ add: 42",
        "assistant │ the answer is 42",
        "result    │ [completed] the answer is 42",
    ]
    lines = noeta(cli_env, "events", task_id, "--json").stdout.splitlines()
    envelopes = [json.loads(line) for line in lines]
    assert [e["seq"] for e in envelopes] == list(range(1, len(envelopes) + 1))
    assert envelopes[0]["type"] == "TaskCreated" and envelopes[-1]["type"] == "TaskCompleted"
    assert noeta(cli_env, "result", task_id).stdout == "the answer is 42\n"


def test_cli_reports_errors_without_a_traceback(cli_env: dict[str, str]):
    bad = noeta(cli_env, "run", "x", "--registry", "tests.support.nowhere:registry")
    assert bad.returncode == 2
    assert bad.stderr.startswith("noeta: ConfigurationError: cannot load registry 'tests.support.nowhere:registry'")
    missing = noeta(cli_env, "result", "no-such-task")
    assert (missing.returncode, missing.stderr) == (2, "noeta: TaskNotFoundError: no task 'no-such-task'\n")


async def test_sync_client_drives_a_task(host, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("sync one"), say("sync two")])

    def drive() -> tuple:
        with Client(host) as client:
            task_id = client.start("first", Options(provider=provider), keep_open=True, task_queue=task_queue,
                                   identity="ops-sync")
            second = client.send_goal(task_id, "second", identity="ops-sync")  # the blocking one once lacked it
            running = client.is_running(task_id)
            client.close_task(task_id)
            final = client.result(task_id)
            seen = (running, client.is_running(task_id), client.describe(task_id).status,
                    client.history(task_id)[0].workflow_execution_started_event_attributes.identity,
                    client.task_url(task_id) == client.aio.task_url(task_id))
            return second, final, [env.type for env in client.events(task_id)], client.messages(task_id), seen

    async with serve(providers=[provider]):
        second, final, types, items, seen = await asyncio.to_thread(drive)
    assert seen == (True, False, "completed", "ops-sync", True)
    assert (second.answer, final.answer) == ("sync two", "sync two")
    assert types[0] == "TaskCreated" and types.count("GoalReceived") == 1 and types[-1] == "TaskCompleted"
    assert items[-3:] == [UserMessage("second"), AssistantMessage("sync two"), Result("sync two", "completed")]


@pytest.mark.slow
@pytest.mark.local_model
@pytest.mark.skipif(importlib.util.find_spec("xllamacpp") is None, reason="needs the [local] extra")
def test_noeta_run_with_no_configuration_uses_the_local_model(cli_env: dict[str, str]):
    configured = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
    env = {k: v for k, v in cli_env.items() if k not in configured}
    run = noeta(env, "run", "Say hello in one short sentence.", "--max-tokens", "24")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()  # real generated text
    task_id = run.stderr.split("task ")[1].split()[0]
    events = [json.loads(line) for line in noeta(env, "events", task_id, "--json").stdout.splitlines()]
    [completed] = [e for e in events if e["type"] == "ProviderCallCompleted"]
    assert completed["actor"] == "provider:default" and completed["payload"]["usage"]["output"] > 0
    [reply] = [e for e in events if e["type"] == "MessagesAppended" and e["actor"] == "provider:default"]
    assert reply["payload"]["messages"][0]["content"][0]["text"].strip() == run.stdout.strip()


def test_worker_registry_serves_the_configured_providers_by_name(monkeypatch, tmp_path):
    from noeta.cli import worker_registry
    from noeta.client.config import Settings
    from noeta.providers.anthropic import AnthropicProvider
    from noeta.providers.openai import OpenAIProvider

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    registry = worker_registry(None, None, Settings(home=tmp_path))
    assert isinstance(registry.providers["default"], AnthropicProvider)
    assert isinstance(registry.providers["anthropic"], AnthropicProvider)
    assert "openai" not in registry.providers  # no key, no base URL: not configured
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert isinstance(worker_registry(None, None, Settings(home=tmp_path)).providers["openai"], OpenAIProvider)


def test_cli_workers_serve_the_builtin_tools_unless_told_otherwise(clean_env, tmp_path):
    from noeta.builtins.tools import BUILTIN_TOOLS
    from noeta.cli import worker_registry
    from noeta.client.config import Settings

    clean_env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    names = {t.name for t in BUILTIN_TOOLS}
    assert names == {"calculator", "word_count", "read_file", "current_time", "wait"}
    settings = Settings(home=tmp_path)
    # With the built-ins comes the memory tool (not read-only, so not in BUILTIN_TOOLS).
    assert set(worker_registry(None, None, settings).tools) == names | {"memory"}
    assert worker_registry(None, None, settings, builtins=False).tools == {}
    user = "tests.support.registry:cli_registry"
    assert set(worker_registry(user, None, settings).tools) == {"add"}  # a user's registry: opt in
    assert set(worker_registry(user, None, settings, builtins=True).tools) == names | {"add", "memory"}


async def test_client_lifecycle_and_the_deprecated_close_of_a_task(host, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("one")])
    seen = []
    async with serve(providers=[provider]):
        async with await AsyncClient.connect(host, observers=[seen.append]) as client:
            task_id = await client.start("first", Options(provider=provider), keep_open=True, task_queue=task_queue)
            await eventually(lambda: any(e.type == "ProviderCallCompleted" for e in seen))
            with pytest.warns(DeprecationWarning, match="close_task"):
                await client.close(task_id)  # the old spelling still closes the task
            assert (await client.result(task_id)).answer == "one"
            followers = list(client._observation.following.values())
        # Leaving the block closed the client: it no longer follows tasks for its observers.
        assert followers and all(f.done() for f in followers)

    def sync_side() -> bool:
        client = Client(host)
        client.close()
        client.close()  # closing twice is harmless
        return client._thread.is_alive()

    assert await asyncio.to_thread(sync_side) is False
