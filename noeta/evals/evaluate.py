"""``evaluate``: score an agent on a dataset (each case a real task) or score recorded tasks."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from noeta.client.options import HostConfig, Options
from noeta.client.runtime import blocking_twin
from noeta.errors import ConfigurationError
from noeta.evals.dataset import Case, load_dataset
from noeta.evals.live import new_eval_id, run_cases
from noeta.evals.recorded import Recorded, score_recorded
from noeta.evals.report import EvalReport
from noeta.evals.scoring import named_scorers
from noeta.protocols.messages import LLMProvider

Dataset = str | Path | Iterable[Case | Mapping[str, Any]]


async def aevaluate(
    dataset: Dataset | None = None,
    *,
    agent: Any = None,
    options: Options | None = None,
    provider: LLMProvider | str | None = None,
    scorers: Sequence[Callable[..., Any]] = (),
    concurrency: int = 4,
    recorded: Sequence[Recorded] | Mapping[str, Recorded] | None = None,
    host: HostConfig | None = None,
    label: str | None = None,
    eval_id: str | None = None,
) -> EvalReport:
    """Async twin of :func:`evaluate`."""
    if agent is not None:
        raise ConfigurationError(
            "named, versioned agents are not in Noeta yet: choose what to evaluate with options= "
            "(model, prompt, tools) and provider="
        )
    named = named_scorers(list(scorers))
    cases = load_dataset(dataset) if dataset is not None else None
    if recorded is not None:
        return await score_recorded(recorded, cases, named, host=host, label=label or "recorded tasks")
    if cases is None:
        raise ConfigurationError("evaluate needs a dataset to run, or recorded= tasks to score")
    options = options or Options()
    chosen = provider if provider is not None else options.provider
    shown = label or (options.model or "") + (f" via {_provider_label(chosen)}" if chosen is not None else "")
    return await run_cases(
        cases, named, options=options, provider=provider, concurrency=concurrency,
        host=host or HostConfig(), label=shown.strip(), eval_id=eval_id or new_eval_id(),
    )


evaluate = blocking_twin(aevaluate, """Score an agent on ``dataset`` (a JSONL/YAML file, or cases
    in code): each case runs as a real task with ``options`` and ``provider`` (at most
    ``concurrency`` at once, tagged NoetaEval = the report's ``eval_id``), then ``scorers`` score
    it. With ``recorded`` (task ids, exports, export files; a list in the dataset's order or a
    mapping by case id), the recorded tasks are scored instead and nothing runs again. ``agent``:
    reserved for named, versioned agents (not in Noeta yet; ConfigurationError). Blocks;
    :func:`aevaluate` in async code.""")


def _provider_label(provider: LLMProvider | str) -> str:
    return provider if isinstance(provider, str) else type(provider).__name__
