"""Online scoring on a worker: :class:`OnlineScorer` is the TaskScorer that ``score_task`` calls
when a task with ``Options.scoring`` ends. It reads the task's event log from history (the task is
still open: its last goal's TaskCompleted is recorded, its workflow not yet closed) and scores it
with the scorers it serves by name; the case is the task's own goal, with no expectations."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from temporalio import activity

from noeta.client.events import history_runs
from noeta.client.projection import project
from noeta.context.content_store import ContentStore
from noeta.evals.dataset import Case
from noeta.evals.run import run_from_events
from noeta.evals.scoring import score_run
from noeta.protocols import event_log as ev
from noeta.protocols.scoring import OnlineScoring, Score, ScoreOutput, ScoreRecord, ScoreRequest, TaskScorer


class OnlineScorer:
    """Scores ended tasks with the scorers it serves (by name), reading bodies from ``store``."""

    def __init__(self, scorers: Mapping[str, Callable[..., Any]], store: ContentStore | None = None) -> None:
        """``scorers``: by the names tasks' ``Options.scoring`` gives them; ``store``: where the
        tasks' bodies are (for scorers that read messages)."""
        self.scorers = dict(scorers)
        self.store = store

    async def score_task(self, request: ScoreRequest) -> ScoreOutput:
        """Score ``request.task_id`` by its scorers; one this worker does not serve scores 0, saying so."""
        events = project(await history_runs(activity.client(), request.task_id), task_id=request.task_id)
        created = next((e.payload for e in events if isinstance(e.payload, ev.TaskCreated)), None)
        case = Case(goal=created.goal if created is not None and created.goal.strip() else "(no goal)", id=request.task_id)
        run = run_from_events(request.task_id, events, self.store)
        served = {n: s for n, s in self.scorers.items() if n in request.scorers}
        row = await score_run(case, run, served)
        scores = [
            ScoreRecord.of(n, row.scores[n] if n in row.scores else Score(0.0, False, "this worker does not serve this scorer"))
            for n in request.scorers
        ]
        return ScoreOutput(scores=scores)


def install_online_scoring(registry: Any, scoring: OnlineScoring | None) -> None:
    """Serve ``scoring``'s scorer objects on ``registry`` (a worker's Registry): its task_scorer
    becomes (or extends) an OnlineScorer reading the registry's content store."""
    if scoring is None:
        return
    current: TaskScorer | None = registry.task_scorer
    if isinstance(current, OnlineScorer):
        current.scorers.update(scoring.objects())
        return
    registry.task_scorer = OnlineScorer(scoring.objects(), registry.content_store)
