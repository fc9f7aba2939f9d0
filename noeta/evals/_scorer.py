"""A built-in scorer: a named callable ``(case, run) -> Score``, named after the function that made
it (``answer_contains``) so a report's columns and ``EvalReport.mean`` name it the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from noeta.evals.dataset import Case
from noeta.evals.run import EvalRun
from noeta.protocols.scoring import Score

ScoreFn = Callable[[Case, EvalRun], Score]


class NamedScorer:
    """A scorer with a name; calling it scores a run."""

    def __init__(self, name: str, fn: ScoreFn) -> None:
        """``name``: the report's column; ``fn``: the scoring."""
        self.name = name
        self._fn = fn

    def __call__(self, case: Case, run: EvalRun) -> Score:
        """Score ``run`` of ``case``."""
        return self._fn(case, run)

    def __repr__(self) -> str:
        return f"<scorer {self.name}>"


def verdict(ok: bool, reason: str) -> Score:
    """1 and passed when ``ok``, else 0: for scorers without partial credit."""
    return Score(1.0 if ok else 0.0, ok, reason)


def missing(what: str) -> Score:
    """The score of a case that gives the scorer nothing to compare with: 0, with the reason."""
    return Score(0.0, False, f"the case has no {what} to compare with")


def shorten(value: Any, limit: int = 80) -> str:
    """``value`` as text for a reason, cut to ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
