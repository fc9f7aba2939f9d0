"""project() is a pure function of history: checked on the recorded histories, no server needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from noeta.client.messages import (
    AssistantMessage,
    InjectedMessage,
    Result,
    ToolResultView,
    ToolUse,
    UserMessage,
    as_messages,
)
from noeta.client.projection import project
from noeta.client.wire import envelope_to_dict
from noeta.context.content_store import ContentNotFoundError, LocalContentStore
from noeta.protocols.tool import ToolContext
from tests.support.tools import big_output

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def events(name: str):
    path = Path(__file__).parent / "histories" / f"{name}.json"
    return WorkflowHistory.from_json(name, path.read_text()).events


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
def test_projection_is_deterministic_gap_free_and_causal(path: Path):
    history = WorkflowHistory.from_json(path.stem, path.read_text()).events
    first = project(history, task_id=path.stem)
    assert [envelope_to_dict(e) for e in first] == [envelope_to_dict(e) for e in project(history, task_id=path.stem)]
    assert [e.seq for e in first] == list(range(1, len(first) + 1))
    assert first[0].type == "TaskCreated"
    for env in first:
        assert env.causation_id is None or 1 <= env.causation_id < env.seq
        assert env.trace_id == first[0].trace_id
        json.dumps(envelope_to_dict(env))  # the wire shape is plain JSON


def test_seed_order_of_the_first_envelopes():
    assert [e.type for e in project(events("tool_loop"))[:3]] == ["TaskCreated", "ContextPlanComposed", "MessagesAppended"]


def test_tool_loop_projection(tmp_path: Path):
    envs = project(events("tool_loop"), task_id="t")
    types = [e.type for e in envs]
    assert types.count("ToolCallStarted") == 5 and types.count("ToolCallCompleted") == 5
    assert types[-1] == "TaskCompleted"
    by_seq = {e.seq: e for e in envs}
    for env in envs:
        if env.type == "ToolCallCompleted":  # a tool result points at its call ...
            assert by_seq[env.causation_id].type == "ToolCallStarted"
            assert by_seq[env.causation_id].payload.call_id == env.payload.call_id
        if env.type == "ToolCallStarted":  # ... the call at its proposal ...
            proposal = by_seq[env.causation_id]
            assert proposal.type == "ToolCallProposed" and proposal.payload.call_id == env.payload.call_id
            message = by_seq[proposal.causation_id]  # ... and the proposal at the model message asking for it
            assert message.type == "MessagesAppended" and message.actor.startswith("provider:")
    # Each round's results form one tool message, in call order, as the workflow appended them.
    rounds = [[b.call_id for b in e.payload.messages[0].content]
              for e in envs if e.type == "MessagesAppended" and e.payload.messages[0].role == "tool"]
    assert rounds == [["c1", "c2"], ["c3", "c4", "c5"]]
    # The 6 KB output lives in the content store: history holds a reference, not the body.
    [big] = [e.payload.messages[0].content[1] for e in envs
             if e.type == "MessagesAppended" and e.payload.messages[0].role == "tool"][:1]
    ref = big.output
    assert ref.size == 6 * 1024 and len(ref.hash) == 64
    with pytest.raises(ContentNotFoundError, match="must use the same content store"):
        as_messages(envs, LocalContentStore(tmp_path / "other"))
    store = LocalContentStore(tmp_path / "paired")
    body = big_output.fn({"kb": 6}, ToolContext(task_id="t", call_id="c2", tool_name="big_output", attempt=1)).output
    assert store.put(body.encode()) == ref
    items = as_messages(envs, store)
    assert ToolResultView("c2", "big_output", True, body) in items
    assert items[:3] == [UserMessage("add 2 and 3"), AssistantMessage("two tools"), ToolUse("c1", "add", {"a": 2, "b": 3})]
    assert ToolResultView("c4", "nope", False, "Unknown tool 'nope'. Available tools: add, big_output, boom.") in items
    assert items[-1] == Result("the sum is 5", "completed")


def test_as_messages_of_the_multi_turn_history(tmp_path: Path):
    items = as_messages(project(events("multi_turn")), LocalContentStore(tmp_path))
    assert items == [
        UserMessage("goal one"),
        AssistantMessage("first"),
        Result("first", "completed"),
        UserMessage("goal two"),
        AssistantMessage("second"),
        Result("second", "completed"),
    ]


def test_validation_history_projects_failures_feedback_and_data(tmp_path: Path):
    envs = project(events("validation"))
    failed = [e.payload for e in envs if e.type == "ValidationFailed"]
    assert [(f.attempt, f.failure_type) for f in failed] == [(1, "schema"), (2, "validator")]
    assert failed[1].issue == "n must be positive"
    assert envs[-1].type == "TaskCompleted" and envs[-1].payload.data == {"n": 7}
    injected = [i for i in as_messages(envs, LocalContentStore(tmp_path)) if isinstance(i, InjectedMessage)]
    assert [i.text.splitlines()[0] for i in injected] == [
        f"Your answer was rejected: {failed[0].issue}",
        "Your answer was rejected: n must be positive",
    ]


def test_retried_provider_call_projects_each_attempt():
    envs = project(events("provider_retried"))
    [retried] = [e for e in envs if e.type == "ProviderCallRetried"]
    [completed] = [e for e in envs if e.type == "ProviderCallCompleted"]
    assert (retried.payload.attempt, retried.payload.retry_after, completed.payload.attempt) == (1, 0.1, 2)
    assert retried.causation_id == completed.causation_id  # both answer the same ProviderCallStarted


def test_guards_history_projects_verdicts_approvals_and_feedback(tmp_path: Path):
    envs = project(events("guards"))
    approvals = [(e.type, e.payload.call_id, e.payload.approver, e.payload.via) for e in envs if e.type.startswith("Approval") and e.type != "ApprovalRequested"]
    # The approver is the caller identity Temporal recorded for the update (this history's recording
    # client), not the name the answer carried ("alice": free text, which anyone could write).
    assert approvals == [("ApprovalGranted", "c2", "20559@vm", "temporal"), ("ApprovalDenied", "c3", "timeout", None)]
    assert all(e.payload.waited_seconds >= 0 for e in envs if e.type in ("ApprovalGranted", "ApprovalDenied"))
    by_seq = {e.seq: e for e in envs}
    for e in envs:
        if e.type in ("ApprovalGranted", "ApprovalDenied"):
            assert by_seq[e.causation_id].type == "ApprovalRequested"
    items = as_messages(envs, LocalContentStore(tmp_path))
    results = {i.call_id: (i.success, i.output) for i in items if isinstance(i, ToolResultView)}
    assert results == {
        "c1": (False, "Denied by guard 'amount': amount above the hard limit"),
        "c2": (True, "wired 2000"),
        "c3": (False, "Not approved by timeout: no answer within 2s"),
    }
    assert [i.text.splitlines()[0] for i in items if isinstance(i, InjectedMessage)] == [
        "You may not finish yet: Denied by guard 'no-early-finish': a draft is not an answer"
    ]


def test_runs_of_a_continued_task_project_as_one_stream(tmp_path: Path):
    runs = [events(f"continue_as_new.run{n}") for n in (1, 2, 3)]
    envs = project(runs, task_id="history-continue_as_new")
    types = [e.type for e in envs]
    assert types.count("TaskCreated") == 1 and types.count("TaskContinuedAsNew") == 2
    assert [e.seq for e in envs] == list(range(1, len(envs) + 1))
    items = as_messages(envs, LocalContentStore(tmp_path))
    assert [i.output for i in items if isinstance(i, ToolResultView)] == ["1", "2", "3", "4"]
    assert InjectedMessage("remember: be brief", "system") in items
    assert items[-1] == Result("counted to 4", "completed")


def test_a_followed_goal_projects_once_across_runs(tmp_path: Path):
    runs = sorted((Path(__file__).parent / "histories").glob("goal_continue_as_new.run*.json"))
    envs = project([events(p.stem) for p in runs], task_id="history-goal_continue_as_new")
    types = [e.type for e in envs]
    assert types.count("GoalReceived") == 1 and types.count("TaskContinuedAsNew") == len(runs) - 1
    items = as_messages(envs, LocalContentStore(tmp_path))
    assert [i.text for i in items if isinstance(i, UserMessage)] == ["first", "count"]
    assert [i.output for i in items if isinstance(i, ToolResultView)] == [str(n + 1) for n in range(12)]
