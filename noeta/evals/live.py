"""Running a dataset: each case as a real task, on the embedded default or the cluster the
environment names, served by an in-process worker on a task queue of its own (as ``query()``: the
eval's provider and tools live in this process), tagged with the eval's id (NoetaEval)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from noeta.client.client import AsyncClient
from noeta.client.options import HostConfig, Options
from noeta.client.start_request import StartAs
from noeta.errors import NoetaError
from noeta.evals.dataset import Case
from noeta.evals.online import install_online_scoring
from noeta.evals.report import EvalReport, EvalRow
from noeta.evals.run import run_from_events
from noeta.evals.scoring import score_run
from noeta.protocols.messages import ImageBlock, LLMProvider
from noeta.sdk._query import _registry_for, serve_script_policies
from noeta.sdk.images import image
from noeta.worker import build_worker


def new_eval_id() -> str:
    """A fresh eval run id (what its tasks' NoetaEval holds)."""
    return f"eval-{uuid.uuid4().hex[:10]}"


async def run_cases(
    cases: Sequence[Case],
    scorers: dict[str, Callable[..., Any]],
    *,
    options: Options,
    provider: LLMProvider | str | None,
    concurrency: int,
    host: HostConfig,
    label: str,
    eval_id: str,
) -> EvalReport:
    """Run every case as a task (at most ``concurrency`` at once) and score each as it ends."""
    store = host.store()
    serve_script_policies(options)
    registry, provider_name = _registry_for(options, provider, store, host.settings, dict(host.resources))
    registry.prices = host.prices
    install_online_scoring(registry, options.scoring)
    client = await AsyncClient.connect(dataclasses.replace(host, content_store=store, delta_sink=None))
    task_queue = f"noeta-eval-{uuid.uuid4().hex[:12]}"
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(case: Case, number: int) -> EvalRow:
        async with gate:
            images = [i if isinstance(i, ImageBlock) else image(i, content_store=store) for i in case.images]
            # AsyncClient.start takes no eval tag: its task operations are asked directly with one.
            task_id = await client._tasks.start(
                case.goal, options, task_id=f"{eval_id}-{number}", keep_open=False, images=images,
                workspace_dir=None, provider_name=provider_name, start_as=StartAs(task_queue, eval_id=eval_id),
            )
            try:
                await client.result(task_id)
            except NoetaError:
                pass  # a failed task is a row like any other: its events say how it ended
            run = run_from_events(task_id, await client.events(task_id), store)
            return await score_run(case, run, scorers)

    try:
        async with build_worker(client.temporal, registry, task_queue):
            rows = await asyncio.gather(*(one(case, n) for n, case in enumerate(cases, 1)))
    finally:
        await client.close()
    return EvalReport(list(rows), label, eval_id, list(scorers))
