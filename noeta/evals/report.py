"""An eval's report: one row per case (its task, each scorer's score, time and cost), the means
per scorer, the gate a CI job checks, and the JSON it keeps."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from noeta.errors import ConfigurationError
from noeta.protocols.scoring import Score

REPORT_FORMAT = "noeta-eval-report/1"


@dataclass(frozen=True)
class EvalRow:
    """One case's run and its scores."""

    case_id: str
    task_id: str
    scores: dict[str, Score]
    """Each scorer's score, by scorer name, in the order the scorers were given."""
    status: str
    """The task's end (``completed``, ``failed``, ``error``, ``cancelled``)."""
    answer: str = ""
    duration_seconds: float = 0.0
    cost_usd: float = 0.0
    """What the task's model calls cost."""
    tokens: int = 0
    tags: tuple[str, ...] = ()
    error: str | None = None

    @property
    def scoring_cost_usd(self) -> float:
        """What scoring this row cost (LLM judges' calls)."""
        return sum(s.cost_usd for s in self.scores.values())

    @property
    def scoring_calls(self) -> int:
        """Model calls its scorers made."""
        return sum(s.model_calls for s in self.scores.values())


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` percentile of ``values`` (nearest rank; 0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


@dataclass(frozen=True)
class EvalReport:
    """The rows of one eval and what they add up to."""

    rows: list[EvalRow]
    label: str = ""
    """What was evaluated (an agent, a model, a provider), shown above the table."""
    eval_id: str = ""
    """The eval run's id: its tasks carry it as NoetaEval (``noeta tasks`` lists them)."""
    scorers: list[str] = field(default_factory=list)

    def mean(self, scorer: str) -> float:
        """The mean of ``scorer``'s values over the rows (KeyError for a scorer not in the report)."""
        if scorer not in self.scorers:
            raise KeyError(f"no scorer {scorer!r} in this report; it has {self.scorers}")
        values = [row.scores[scorer].value for row in self.rows if scorer in row.scores]
        return sum(values) / len(values) if values else 0.0

    def passed(self, scorer: str) -> int:
        """How many rows ``scorer`` passed."""
        return sum(1 for row in self.rows if scorer in row.scores and row.scores[scorer].passed)

    @property
    def cost_usd(self) -> float:
        """The tasks' cost plus the scoring's."""
        return sum(r.cost_usd + r.scoring_cost_usd for r in self.rows)

    @property
    def scoring_cost_usd(self) -> float:
        """What scoring cost (LLM judges)."""
        return sum(r.scoring_cost_usd for r in self.rows)

    @property
    def scoring_calls(self) -> int:
        """Model calls the scorers made."""
        return sum(r.scoring_calls for r in self.rows)

    def seconds(self, fraction: float) -> float:
        """A percentile of the tasks' durations (0.5: p50, 0.95: p95)."""
        return percentile([r.duration_seconds for r in self.rows], fraction)

    def below(self, thresholds: Mapping[str, float] | float) -> dict[str, float]:
        """The scorers whose mean is below their threshold (a float applies to every scorer), with
        their means: empty when the gate passes."""
        wanted = {s: float(thresholds) for s in self.scorers} if isinstance(thresholds, (int, float)) else dict(thresholds)
        unknown = sorted(set(wanted) - set(self.scorers))
        if unknown:
            raise ConfigurationError(f"thresholds name scorers not in the report: {unknown} (it has {self.scorers})")
        return {s: self.mean(s) for s, limit in wanted.items() if self.mean(s) < limit - 1e-9}

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON values (``to_json`` writes them)."""
        return {
            "format": REPORT_FORMAT,
            "label": self.label,
            "eval_id": self.eval_id,
            "scorers": {s: {"mean": self.mean(s), "passed": self.passed(s), "cases": len(self.rows)} for s in self.scorers},
            "cost_usd": self.cost_usd,
            "scoring_cost_usd": self.scoring_cost_usd,
            "scoring_calls": self.scoring_calls,
            "p50_seconds": self.seconds(0.5),
            "p95_seconds": self.seconds(0.95),
            "rows": [
                {**{k: v for k, v in asdict(r).items() if k != "scores"}, "tags": list(r.tags),
                 "scores": {n: asdict(s) for n, s in r.scores.items()}}
                for r in self.rows
            ],
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The report as JSON text, for CI."""
        return json.dumps(self.to_dict(), indent=indent)


def report_from_dict(data: Mapping[str, Any]) -> EvalReport:
    """A report read back from ``to_dict``/``to_json`` (to compare with a kept one)."""
    if data.get("format") != REPORT_FORMAT:
        raise ConfigurationError(f"not an eval report (format {data.get('format')!r}, expected {REPORT_FORMAT!r})")
    rows = [
        EvalRow(**{**{k: v for k, v in r.items() if k not in ("scores", "tags")}, "tags": tuple(r.get("tags") or ()),
                   "scores": {n: Score(**s) for n, s in r["scores"].items()}})
        for r in data["rows"]
    ]
    return EvalReport(rows, str(data.get("label") or ""), str(data.get("eval_id") or ""), list(data["scorers"]))
