"""The bench's count of Temporal Cloud's billable actions (tests/support/billable_actions.py), on
recorded histories whose every event is known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from tests.support.billable_actions import billable_actions, total_actions

HISTORIES = Path(__file__).parent / "histories"


def events(name: str) -> list:
    return list(WorkflowHistory.from_json("task", json.loads((HISTORIES / name).read_text())).events)


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        # Start; one workflow task reported every local call; the patch's TemporalChangeVersion
        # upsert is exempt, the final status upsert is not.
        ("local-model-calls/local_model_calls.json",
         {"workflow_execution_started": 1, "local_activity_batches": 1, "search_attribute_upserts": 1}),
        # Before PATCH_LOCAL_REPORTS every 20th model call was an ordinary activity: it ended the workflow task, so the local
        # calls after it were a second batch.
        ("local-model-calls/local_model_calls_long.json",
         {"workflow_execution_started": 1, "activity_attempts": 1, "local_activity_batches": 2,
          "search_attribute_upserts": 1}),
        # The same 22 calls after PATCH_LOCAL_REPORTS (a report every 100th call): one batch.
        ("local-reports-100/local_model_calls_reports.json",
         {"workflow_execution_started": 1, "local_activity_batches": 1, "search_attribute_upserts": 1}),
        # Ordinary activities only: one action per attempt.
        ("tool_loop.json", {"workflow_execution_started": 1, "activity_attempts": 9}),
        # Updates and signals count one each.
        ("busy-goals/thread.json",
         {"workflow_execution_started": 1, "workflow_execution_update_accepted": 2, "activity_attempts": 2,
          "search_attribute_upserts": 4, "workflow_execution_signaled": 1, "local_activity_batches": 1}),
    ],
)
def test_billable_actions_of_recorded_histories(history: str, expected: dict[str, int]) -> None:
    recorded = events(history)
    assert billable_actions(recorded) == expected
    assert total_actions(recorded) == sum(expected.values())


def test_a_retried_activity_costs_each_attempt() -> None:
    recorded = events("provider_retried.json")
    started = [e for e in recorded if e.HasField("activity_task_started_event_attributes")]
    attempts = sum(e.activity_task_started_event_attributes.attempt for e in started)
    assert attempts > len(started)  # the history holds a retried call
    assert billable_actions(recorded)["activity_attempts"] == attempts
