"""Worker tuning: settings from flags and the environment, and thread pools that isolate hung tools."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest

from noeta.cli import add_tuning_arguments, tuning_from_args
from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import ConfigurationError
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.config.tuning import WorkerTuning
from noeta.worker import Registry, build_worker
from tests.support.scripts import call, say
from tests.support.tools import add

RELEASE = threading.Event()


@tool(name="hang", version="1", input_schema={"type": "object"}, description="Blocks its thread.",
      timeout_seconds=1, max_retries=0)
def hang(arguments: dict, ctx: ToolContext) -> ToolResult:
    RELEASE.wait(120)  # a synchronous tool that ignores its timeout, as hung I/O does
    return ToolResult(success=True, output="late")


def test_tuning_reads_the_environment(clean_env: pytest.MonkeyPatch):
    clean_env.setenv("NOETA_MAX_ACTIVITIES", "7")
    clean_env.setenv("NOETA_SYNC_TOOL_THREADS", "3")
    tuning = WorkerTuning()
    assert (tuning.max_activities, tuning.sync_tool_threads, tuning.max_cached_workflows) == (7, 3, 1000)
    assert tuning.worker_kwargs()["max_concurrent_activities"] == 7


def test_the_transcript_cache_is_sized_from_the_tuning(clean_env: pytest.MonkeyPatch, tmp_path):
    from noeta.activities.agent import AgentActivities
    from noeta.context.content_store import LocalContentStore

    clean_env.setenv("NOETA_TRANSCRIPT_CACHE_MB", "3")
    registry = Registry.of(content_store=LocalContentStore(tmp_path))
    assert AgentActivities(registry).services.transcripts._cache_limit == 3 * 2**20
    assert AgentActivities(registry, WorkerTuning(transcript_cache_mb=5)).services.transcripts._cache_limit == 5 * 2**20


@pytest.mark.parametrize(
    ("variable", "value", "match"),
    [
        ("NOETA_MAX_ACTIVITIES", "many", "NOETA_MAX_ACTIVITIES must be a whole number"),
        ("NOETA_SYNC_TOOL_THREADS", "0", r"sync_tool_threads \(NOETA_SYNC_TOOL_THREADS\) must be a whole number from 1 to 4096"),
        ("NOETA_MAX_CACHED_WORKFLOWS", "99999999", "from 1 to 1000000"),
        ("NOETA_STICKY_QUEUE_TIMEOUT_SECONDS", "0",
         r"sticky_queue_timeout_seconds \(NOETA_STICKY_QUEUE_TIMEOUT_SECONDS\) must be a whole number from 1 to 600"),
        ("NOETA_STICKY_QUEUE_TIMEOUT_SECONDS", "2.5", "NOETA_STICKY_QUEUE_TIMEOUT_SECONDS must be a whole number"),
        ("NOETA_STICKY_QUEUE_TIMEOUT_SECONDS", "601", "from 1 to 600"),
    ],
)
def test_bad_tuning_values_are_refused_with_the_allowed_range(clean_env: pytest.MonkeyPatch, variable, value, match):
    clean_env.setenv(variable, value)
    with pytest.raises(ConfigurationError, match=match):
        WorkerTuning()


def test_worker_flags_win_over_the_environment(clean_env: pytest.MonkeyPatch):
    import argparse

    clean_env.setenv("NOETA_IO_THREADS", "5")
    parser = argparse.ArgumentParser()
    add_tuning_arguments(parser)
    tuning = tuning_from_args(parser.parse_args(["--max-workflow-tasks", "4", "--sync-tool-threads", "2"]))
    assert (tuning.max_workflow_tasks, tuning.sync_tool_threads, tuning.io_threads) == (4, 2, 5)


async def test_the_sticky_queue_timeout_reaches_the_worker(
    client: AsyncClient, content_store, task_queue, clean_env: pytest.MonkeyPatch
):
    import argparse

    registry = Registry.of(content_store=content_store)
    default = build_worker(client.temporal, registry, f"{task_queue}-1")
    assert default.config()["sticky_queue_schedule_to_start_timeout"] == timedelta(seconds=5)  # not temporalio's 10
    clean_env.setenv("NOETA_STICKY_QUEUE_TIMEOUT_SECONDS", "3")
    from_env = build_worker(client.temporal, registry, f"{task_queue}-2")
    assert from_env.config()["sticky_queue_schedule_to_start_timeout"] == timedelta(seconds=3)
    parser = argparse.ArgumentParser()
    add_tuning_arguments(parser)
    tuning = tuning_from_args(parser.parse_args(["--sticky-queue-timeout-seconds", "2"]))
    flagged = build_worker(client.temporal, registry, f"{task_queue}-3", tuning=tuning)
    assert flagged.config()["sticky_queue_schedule_to_start_timeout"] == timedelta(seconds=2)
    with pytest.raises(ConfigurationError, match="from 1 to 600, got 0"):
        WorkerTuning(sticky_queue_timeout_seconds=0)


async def test_hung_sync_tools_do_not_starve_other_tasks(client: AsyncClient, content_store, task_queue):
    # Both sync-tool threads end up held by hung calls; the model calls of another task still need
    # content-store I/O and run on their own pool, and an async tool needs no thread at all.
    hung_provider = FakeLLMProvider(responder=lambda r: say("gave up") if len(r.messages) > 1 else call(("h", "hang", {})))
    healthy_provider = FakeLLMProvider(
        responder=lambda r: say("sum done") if len(r.messages) > 1 else call(("a", "add_async", {"a": 1, "b": 2}))
    )
    registry = Registry.of(tools=[hang, add, add_async], providers={"hung": hung_provider, "healthy": healthy_provider},
                           content_store=content_store)
    async with build_worker(client.temporal, registry, task_queue, tuning=WorkerTuning(sync_tool_threads=2, io_threads=2)):
        try:
            hung = [await client.start("hang", Options(provider="hung", allowed_tools=["hang"]), task_queue=task_queue)
                    for _ in range(2)]
            # Starved, these would wait for the hung threads (120 s); the bound is the point here.
            for task_id in hung:  # each hung call timed out: the model was told and answered
                assert (await asyncio.wait_for(client.result(task_id), 45)).answer == "gave up"
            task_id = await client.start("add", Options(provider="healthy", allowed_tools=["add_async"]), task_queue=task_queue)
            result = await asyncio.wait_for(client.result(task_id), 45)
            assert (result.status, result.answer) == ("completed", "sum done")
            messages = await client.messages(task_id)
            assert any(getattr(m, "output", None) == "3" for m in messages)
        finally:
            RELEASE.set()  # before the worker stops: it waits for its running activities


@tool(name="add_async", version="1",
      input_schema={"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
      description="Add two numbers (async).")
async def add_async(arguments: dict, ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output=str(arguments["a"] + arguments["b"]))
