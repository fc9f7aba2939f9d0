"""Scoring recorded tasks: their runs read from history (task ids) or exports, never run again —
no tool and no model of the task is called; only the scorers run (an LLM judge calls its own)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from noeta.client.client import AsyncClient
from noeta.client.export import LoadedTask, load_export
from noeta.client.options import HostConfig
from noeta.errors import ConfigurationError
from noeta.evals.dataset import Case
from noeta.evals.report import EvalReport
from noeta.evals.run import EvalRun, run_from_events
from noeta.evals.scoring import score_run
from noeta.protocols import event_log as ev

Recorded = str | LoadedTask | Mapping[str, Any] | Path


async def read_run(item: Recorded, client: AsyncClient | None) -> EvalRun:
    """The run of a recorded task: a task id (read through ``client``), a LoadedTask, an export or
    an export file."""
    if isinstance(item, str):
        if client is None:
            raise ConfigurationError("scoring task ids needs a client")
        return run_from_events(item, await client.events(item), client.content_store)
    loaded = item if isinstance(item, LoadedTask) else load_export(item.read_bytes() if isinstance(item, Path) else item)
    return run_from_events(loaded.task_id, loaded.events(), loaded.store)


def case_for(run: EvalRun) -> Case:
    """The case of a recorded task scored without a dataset: its own goal, no expectations."""
    created = next((e.payload for e in run.events if isinstance(e.payload, ev.TaskCreated)), None)
    goal = created.goal if created is not None and created.goal.strip() else "(no goal)"
    return Case(goal=goal, id=run.task_id)


async def score_recorded(
    tasks: Sequence[Recorded] | Mapping[str, Recorded],
    cases: Sequence[Case] | None,
    scorers: dict[str, Callable[..., Any]],
    *,
    host: HostConfig | None,
    label: str,
) -> EvalReport:
    """Score recorded tasks. With ``cases``, ``tasks`` pairs with them: a mapping by case id, or a
    list in the dataset's order; without, each task is its own case (its goal)."""
    if isinstance(tasks, Mapping):
        if cases is None:
            raise ConfigurationError("recorded tasks by case id need the dataset they are cases of")
        by_id = {c.id: c for c in cases}
        unknown = sorted(set(tasks) - set(by_id))
        if unknown:
            raise ConfigurationError(f"recorded tasks name cases the dataset lacks: {unknown}")
        pairs: list[tuple[Case | None, Recorded]] = [(by_id[k], t) for k, t in tasks.items()]
    else:
        if cases is not None and len(cases) != len(tasks):
            raise ConfigurationError(f"{len(tasks)} recorded task(s) for {len(cases)} case(s): give one per case")
        pairs = list(zip(cases if cases is not None else [None] * len(tasks), tasks, strict=True))
    needs_client = any(isinstance(t, str) for _, t in pairs)
    client = await AsyncClient.connect(host) if needs_client else None
    try:
        rows = []
        for case, item in pairs:
            run = await read_run(item, client)
            rows.append(await score_run(case if case is not None else case_for(run), run, scorers))
    finally:
        if client is not None:
            await client.close()
    return EvalReport(rows, label, "", list(scorers))
