"""A task with online scoring (``Options.scoring``) is scored as it ends, by one score_task activity.

Why an activity of the task itself: a score must be a recorded fact of the task (docs/evaluating.md),
and a finished workflow takes no signal or update; scoring after the last goal and before the
workflow returns puts the scores in the task's own history, read back on replay (a scorer never
runs twice for one task) and projected as ``TaskScored``. The sample is drawn from the task id, so
replay decides the same; tasks without scoring never ask the patch and their commands are unchanged.
The task's outcome never depends on its scoring: a failed score_task is left out of the record.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

from noeta.protocols.activity_options import ActivityOptions
from noeta.protocols.names import PATCH_TASK_SCORED, SCORE_TASK
from noeta.protocols.scoring import ScoreOutput, ScoreRequest, in_sample, mean_value
from noeta.protocols.task import TaskInput
from noeta.temporal.search_attributes import SCORE
from noeta.workflows import patches
from noeta.workflows.steps import execute, retry_policy

#: An LLM judge is a model call or more: scoring gets the time of one, per attempt.
SCORING_SECONDS = 300.0
SCORING = ActivityOptions(start_to_close_seconds=SCORING_SECONDS)


async def score_ended_task(task: TaskInput) -> ScoreOutput | None:
    """Score the ended task when its input asks for it and its id is in the sample (None otherwise,
    or when scoring failed); with ``plan.index`` its NoetaScore is set to the scores' mean."""
    plan = task.scoring
    task_id = workflow.info().workflow_id
    if plan is None or not plan.scorers or not in_sample(task_id, plan.sample):
        return None
    if not patches.patched(PATCH_TASK_SCORED):
        return None
    try:
        out = await execute(
            SCORE_TASK, ScoreRequest(task_id, list(plan.scorers)), ScoreOutput,
            f"score by {', '.join(plan.scorers)}", SCORING,
            start_to_close=SCORING_SECONDS, retry=retry_policy(SCORING, task.max_retries), heartbeat=None,
        )
    except ActivityError:
        return None
    mean = mean_value(out.scores)
    if plan.index and task.index and mean is not None:
        workflow.upsert_search_attributes([SCORE.value_set(mean)])
    return out
