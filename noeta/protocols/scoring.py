"""Scores as recorded facts: what a scorer returns, what a task's online scoring records in its
history, and how the workflow decides (deterministically) whether a task is in the sample.

Pure types: the scorers themselves and the runs they read live in :mod:`noeta.evals`; the worker
serves a task's online scoring through a :class:`TaskScorer` it is given (dependency injection: the
activity layer cannot read a task's event log, which is projected above it).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from noeta.errors import ConfigurationError

#: How many buckets the sample is drawn from: a task is in it when its id hashes below sample x this.
SAMPLE_BUCKETS = 10_000


@dataclass(frozen=True, slots=True)
class Score:
    """What a scorer says about one run: ``value`` in 0..1, whether it ``passed``, and why."""

    value: float
    """0 (wrong) to 1 (right); partial credit in between."""
    passed: bool
    """Whether the run meets the scorer's bar (usually ``value == 1`` or above a threshold)."""
    reason: str = ""
    """Why, in a sentence a reviewer reads in the report."""
    cost_usd: float = 0.0
    """What scoring cost (an LLM judge's model calls; 0 for the others)."""
    model_calls: int = 0
    """Model calls the scorer made (an LLM judge's)."""

    def __post_init__(self) -> None:
        """ConfigurationError for a value outside 0..1 (or NaN): a report's means would lie."""
        if not isinstance(self.value, (int, float)) or math.isnan(self.value) or not 0.0 <= self.value <= 1.0:
            raise ConfigurationError(f"a Score's value is between 0 and 1, got {self.value!r}")


@dataclass(frozen=True, slots=True)
class ScoreRecord:
    """One scorer's score of a task, as recorded in the task's history (``TaskScored``)."""

    scorer: str
    value: float
    passed: bool
    reason: str = ""
    cost_usd: float = 0.0
    model_calls: int = 0

    @classmethod
    def of(cls, scorer: str, score: Score) -> ScoreRecord:
        """``score`` under the scorer's name."""
        return cls(scorer, float(score.value), score.passed, score.reason, score.cost_usd, score.model_calls)


@dataclass(frozen=True, slots=True)
class ScoringPlan:
    """A task's online scoring as its input records it: which of the worker's scorers score it,
    and the fraction of tasks they score."""

    scorers: list[str] = field(default_factory=list)
    """Names of scorers the worker's TaskScorer knows."""
    sample: float = 1.0
    """0..1: the fraction of tasks scored, drawn by task id (the same task is always in or out)."""
    index: bool = False
    """Also set NoetaScore (the cluster has it registered; set by the client that starts the task)."""


@dataclass(frozen=True, slots=True)
class ScoreRequest:
    """The score_task activity's input: the task to score and by which scorers."""

    task_id: str
    scorers: list[str]


@dataclass(frozen=True, slots=True)
class ScoreOutput:
    """The score_task activity's result: the scores (a scorer that raised scores 0 with the error
    as its reason), or why nothing was scored."""

    scores: list[ScoreRecord] = field(default_factory=list)
    skipped: str | None = None
    """Set when the worker could not score the task (it serves no scorer, or not these)."""


@runtime_checkable
class TaskScorer(Protocol):
    """What a worker scores finished tasks with (:class:`noeta.evals.online.OnlineScorer`)."""

    async def score_task(self, request: ScoreRequest) -> ScoreOutput:
        """Score the task ``request`` names, by its scorers."""
        ...


@dataclass(frozen=True, slots=True)
class OnlineScoring:
    """``Options.scoring``: score a sample of this agent's tasks as they end. ``scorers`` are
    callables ``(case, run) -> Score`` (named after their ``name`` attribute or function name) or
    names of scorers the worker serves; ``sample`` is the fraction of tasks scored (0..1)."""

    scorers: Sequence[Callable[..., Any] | str] = ()
    sample: float = 1.0

    def __post_init__(self) -> None:
        """ConfigurationError for a sample outside 0..1, no scorers, or two scorers of one name."""
        if not isinstance(self.sample, (int, float)) or math.isnan(self.sample) or not 0.0 <= self.sample <= 1.0:
            raise ConfigurationError(f"OnlineScoring.sample is a fraction between 0 and 1, got {self.sample!r}")
        if isinstance(self.scorers, (str, bytes)) or not self.scorers:
            raise ConfigurationError("OnlineScoring.scorers is a non-empty list of scorers or scorer names")
        names = self.names()
        if len(set(names)) != len(names):
            raise ConfigurationError(f"two online scorers share a name: {names}")

    def names(self) -> list[str]:
        """Each scorer's name, in order."""
        return [s if isinstance(s, str) else scorer_name(s) for s in self.scorers]

    def objects(self) -> dict[str, Callable[..., Any]]:
        """The scorers given as callables, by name (names refer to the worker's)."""
        return {scorer_name(s): s for s in self.scorers if not isinstance(s, str)}

    def plan(self) -> ScoringPlan:
        """What the task's input records."""
        return ScoringPlan(self.names(), float(self.sample))


def scorer_name(scorer: Callable[..., Any]) -> str:
    """A scorer's name: its ``name`` attribute (the built-ins'), else its function's name."""
    name = getattr(scorer, "name", None) or getattr(scorer, "__name__", None)
    if not isinstance(name, str) or not name or name == "<lambda>":
        raise ConfigurationError(f"scorer {scorer!r} needs a name: give it a `name` attribute or use a def")
    return name


def in_sample(task_id: str, sample: float) -> bool:
    """Whether ``task_id`` is in a sample of ``sample`` (0..1) of tasks: a hash of the id, so the
    workflow decides the same on replay and a task is never half scored."""
    if sample >= 1.0:
        return True
    if sample <= 0.0:
        return False
    return zlib.crc32(task_id.encode()) % SAMPLE_BUCKETS < sample * SAMPLE_BUCKETS


def mean_value(scores: Sequence[ScoreRecord]) -> float | None:
    """The mean of the scores' values (None without any)."""
    return sum(s.value for s in scores) / len(scores) if scores else None


__all__ = [
    "OnlineScoring", "Score", "ScoreOutput", "ScoreRecord", "ScoreRequest", "ScoringPlan", "TaskScorer",
    "in_sample", "mean_value", "scorer_name",
]
