"""Scoring one run: every scorer of an eval on it, each failure of a scorer its own zero (one
broken scorer never hides the others' scores), off the event loop (a judge calls a model)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from noeta.evals.dataset import Case
from noeta.evals.report import EvalRow
from noeta.evals.run import EvalRun
from noeta.errors import ConfigurationError
from noeta.protocols.scoring import Score, scorer_name

logger = logging.getLogger(__name__)

Scorer = Callable[[Case, EvalRun], Score]


def named_scorers(scorers: Sequence[Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """The scorers by name, in order; ConfigurationError for none or two of one name."""
    if isinstance(scorers, (str, bytes)) or not scorers:
        raise ConfigurationError("an eval needs scorers: callables (case, run) -> Score, e.g. scorers.answer_contains()")
    named: dict[str, Callable[..., Any]] = {}
    for scorer in scorers:
        if not callable(scorer):
            raise ConfigurationError(f"scorer {scorer!r} is not callable (case, run) -> Score")
        name = scorer_name(scorer)
        if name in named:
            raise ConfigurationError(f"two scorers are named {name!r}; give one a name (llm_judge(..., name=...))")
        named[name] = scorer
    return named


def score_once(name: str, scorer: Callable[..., Any], case: Case, run: EvalRun) -> Score:
    """``scorer``'s score of ``run``; a scorer that raises or returns no Score scores 0, saying why."""
    try:
        score = scorer(case, run)
    except Exception as err:  # a scorer's bug is its row's zero, not the eval's end
        logger.warning("scorer %s failed on case %s: %s", name, case.id, err)
        return Score(0.0, False, f"the scorer raised {type(err).__name__}: {err}")
    if not isinstance(score, Score):
        return Score(0.0, False, f"the scorer returned {type(score).__name__}, not a Score")
    return score


async def score_run(case: Case, run: EvalRun, scorers: dict[str, Callable[..., Any]]) -> EvalRow:
    """One row: ``run`` of ``case`` scored by each of ``scorers``."""
    scores = {}
    for name, scorer in scorers.items():
        scores[name] = await asyncio.to_thread(score_once, name, scorer, case, run)
    return EvalRow(
        case_id=case.id, task_id=run.task_id, scores=scores, status=run.status, answer=run.answer,
        duration_seconds=run.duration_seconds, cost_usd=run.cost_usd, tokens=run.tokens, tags=tuple(case.tags),
        error=run.error,
    )
