"""``score_task``: a task with online scoring (``Options.scoring``) is scored as it ends.

The activity layer cannot read a task's event log (it is projected above it), so the worker is
given a :class:`~noeta.protocols.scoring.TaskScorer` (``Registry.task_scorer``; ``query()``,
``evaluate()`` and ``noeta worker`` install :class:`noeta.evals.online.OnlineScorer`). What it
returns is the activity's result, so the scores are in the task's history: replay reads them
back and never scores again, and the projection shows them as ``TaskScored``.
"""

from __future__ import annotations

from temporalio import activity

from noeta.activities.registry import Registry
from noeta.protocols.names import SCORE_TASK
from noeta.protocols.scoring import ScoreOutput, ScoreRequest
from noeta.telemetry.metrics import observe_score


class Scoring:
    """``score_task``, served by the registry's TaskScorer."""

    def __init__(self, registry: Registry) -> None:
        """``registry``: the worker's, whose ``task_scorer`` scores."""
        self.registry = registry

    @activity.defn(name=SCORE_TASK)
    async def score_task(self, request: ScoreRequest) -> ScoreOutput:
        """Score the task by the scorers it names; a worker without a scorer says so (the task's
        outcome never depends on its scoring)."""
        scorer = self.registry.task_scorer
        if scorer is None:
            return ScoreOutput(skipped="this worker serves no scorers (Registry.task_scorer is unset)")
        output = await scorer.score_task(request)
        meter = activity.metric_meter()
        for record in output.scores:
            observe_score(meter, record.scorer, record.value, record.passed)
        return output


__all__ = ["Scoring"]
