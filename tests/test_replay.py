"""Recorded histories replay against today's AgentWorkflow: a change that would break running
workflows fails here. (Record new ones with ``python -m tests.histories.record``.)"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from noeta.protocols.names import (
    BUILTIN_POLICY_WORKFLOW_NAME,
    PATCH_BUDGETS,
    PATCH_BUILTIN_POLICY_CHILDREN,
    PATCH_EDITED_APPROVALS,
    PATCH_LEAN_STEPS,
    PATCH_LOCAL_MODEL_CALLS,
    PATCH_LOCAL_REPORTS,
    PATCH_LOCAL_TOOLS,
    PATCH_MCP_ELICITATION,
    PATCH_MCP_ELICITATION_HELD,
    PATCH_MCP_LOGIN_WAIT,
    PATCH_MCP_SAMPLING,
    PATCH_REFUSALS_RECORDED,
)
from tests.support.replay import replay

ROOT = Path(__file__).parent / "histories"
#: Top level: the first workflow shape; each subdirectory: the shape behind one workflow.patched id.
HISTORIES = sorted(ROOT.glob("**/*.json"))
SCENARIOS = {"tool_loop", "multi_turn", "subtask", "max_turns", "provider_exhausted", "validation", "provider_retried",
             "guards", "continue_as_new.run1", "continue_as_new.run2", "goal_continue_as_new.run1"}


def load(path: Path) -> WorkflowHistory:
    # "<scenario>.json", or "<scenario>.runN.json" for each run of a task that continued as new
    return WorkflowHistory.from_json(f"history-{path.stem.split('.')[0]}", path.read_text())


@pytest.mark.parametrize("shape", [ROOT, ROOT / PATCH_LEAN_STEPS], ids=["first", PATCH_LEAN_STEPS])
def test_histories_are_recorded(shape: Path):
    assert {p.stem for p in shape.glob("*.json")} >= SCENARIOS


def test_budget_histories_are_recorded():
    """Limits stopping a sub-agent (warnings, rolled-up spend) and a priced task across runs."""
    assert {p.stem for p in (ROOT / PATCH_BUDGETS).glob("*.json")} >= {
        "budget_subtask", "budget_cost.run1", "budget_cost.run2"
    }


def test_builtin_policy_histories_are_recorded():
    # Tasks on the built-in policy run as their own, unsandboxed workflow type; a sub-agent on it too
    # (PATCH_BUILTIN_POLICY_CHILDREN). Replayed below with that type's runner.
    shape = ROOT / PATCH_BUILTIN_POLICY_CHILDREN
    assert {p.stem for p in shape.glob("*.json")} >= {"tool_loop", "failed_subtask", "guards", "continue_as_new.run2"}
    started = json.loads((shape / "tool_loop.json").read_text())["events"][0]
    assert started["workflowExecutionStartedEventAttributes"]["workflowType"]["name"] == BUILTIN_POLICY_WORKFLOW_NAME


def test_refusal_histories_are_recorded():
    # The scenarios whose command sequence PATCH_REFUSALS_RECORDED changed (tasks without a refusal
    # are unchanged and covered above).
    assert {p.stem for p in (ROOT / PATCH_REFUSALS_RECORDED).glob("*.json")} >= {"refusals", "tool_loop", "guards"}


def test_workflow_stream_histories_are_recorded():
    # Tasks read through their workflow stream (bench/streams.py --record): listen and publish
    # signals in history, one of them across continue-as-new; replayed like every other history.
    shape = ROOT / "workflow-streams"
    assert {p.stem for p in shape.glob("*.json")} >= {"streamed", "streamed_continue_as_new.run1", "streamed_continue_as_new.run2"}
    for path in shape.glob("*.json"):  # the reader's lease travels in the carry: a signal in the first run
        assert "__temporal_workflow_stream_publish" in path.read_text()
        assert ("noeta.stream_listen" in path.read_text()) == ("run2" not in path.name)


def test_workflow_stream_batch_histories_are_recorded():
    # The same tasks once a model call's batch became one compact noeta.stream_batch signal (no
    # command changed, so no patch id): the new handler keeps replaying, across continue-as-new too.
    shape = ROOT / "workflow-streams-batch"
    assert {p.stem for p in shape.glob("*.json")} >= {"streamed", "streamed_continue_as_new.run1", "streamed_continue_as_new.run2"}
    for path in shape.glob("*.json"):
        text = path.read_text()
        assert '"noeta.stream_batch"' in text and "__temporal_workflow_stream_publish" not in text
        assert ('"noeta.stream_listen"' in text) == ("run2" not in path.name)


def test_local_tool_histories_are_recorded():
    # The built-in tools that cannot block, called as activities before local-tools, as local
    # activities behind its patch, then decided by the task's recorded shape without the patch:
    # all three must keep replaying (the second only while the code still asks the patch there).
    assert (ROOT / PATCH_REFUSALS_RECORDED / "builtin_tools.json").exists()
    assert (ROOT / PATCH_LOCAL_TOOLS / "builtin_tools.json").exists()
    before = (ROOT / PATCH_REFUSALS_RECORDED / "builtin_tools.json").read_text()
    after = (ROOT / PATCH_LOCAL_TOOLS / "builtin_tools.json").read_text()
    by_shape = (ROOT / "local-tools-by-shape" / "builtin_tools.json").read_text()
    assert before.count('"name": "noeta.invoke_tool"') == 3 and after.count('"name": "noeta.invoke_tool"') == 0
    assert '"core_patch"' in after and '"core_patch"' not in by_shape and by_shape.count('"name": "noeta.invoke_tool"') == 0


def test_local_model_call_histories_are_recorded():
    # Model calls as local activities (model_local_activity): no call_model activity, one marker per
    # call (the retried one's included), behind PATCH_LOCAL_MODEL_CALLS; and the same flag on a task
    # that a worker of the previous release ran (it ignores the field: ordinary call_model
    # activities, no marker), which today's code must replay along the ordinary path.
    shape = ROOT / PATCH_LOCAL_MODEL_CALLS
    history = (shape / "local_model_calls.json").read_text()
    assert '"name": "noeta.call_model"' not in history and history.count('"core_local_activity"') == 5
    assert history.count('"core_patch"') == 1
    # 22 calls: the 20th an ordinary activity, which ended the workflow task (LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK)
    long = (shape / "local_model_calls_long.json").read_text()
    assert long.count('"name": "noeta.call_model"') == 1 and long.count('"EVENT_TYPE_WORKFLOW_TASK_COMPLETED"') == 2
    # The same 22 calls after PATCH_LOCAL_REPORTS: its marker at the 20th call, which stays local.
    reports = (ROOT / PATCH_LOCAL_REPORTS / "local_model_calls_reports.json").read_text()
    assert '"name": "noeta.call_model"' not in reports and reports.count('"EVENT_TYPE_WORKFLOW_TASK_COMPLETED"') == 1
    assert reports.count('"core_patch"') == 2 and reports.count('"core_local_activity"') == 44
    older = json.loads((shape / "flag_on_previous_release.json").read_text())
    task_input = base64.b64decode(older["events"][0]["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]["data"])
    assert b'"model_local_activity":true' in task_input
    assert json.dumps(older).count('"name": "noeta.call_model"') == 2 and '"core_patch"' not in json.dumps(older)


def test_local_model_call_histories_by_shape_are_recorded():
    # Tasks prepared at SHAPE_LOCAL_MODEL_CALLS_BY_DATA take the local path by the flag in their
    # input: no patch marker, also not PATCH_LOCAL_REPORTS's at the 20th of 22 calls, which stays local.
    shape = ROOT / "local-model-calls-by-shape"
    history = (shape / "local_model_calls.json").read_text()
    assert '"name": "noeta.call_model"' not in history and history.count('"core_local_activity"') == 5
    assert '"core_patch"' not in history and "TemporalChangeVersion" not in history
    long = (shape / "local_model_calls_reports.json").read_text()
    assert '"name": "noeta.call_model"' not in long and long.count('"EVENT_TYPE_WORKFLOW_TASK_COMPLETED"') == 1
    assert '"core_patch"' not in long and long.count('"core_local_activity"') == 44
    backoff = (shape / "local_model_backoff.json").read_text()
    assert '"core_patch"' not in backoff and '"EVENT_TYPE_TIMER_STARTED"' in backoff


def test_edited_approval_histories_are_recorded():
    # Approvals that replace a call's arguments: the guards' second look is behind edited-approvals,
    # asked only by a task that receives such an approval.
    history = (ROOT / PATCH_EDITED_APPROVALS / "edited_approvals.json").read_text()
    assert history.count('"name": "noeta.check_guards"') == 4 and history.count('"name": "noeta.invoke_tool"') == 1
    assert PATCH_EDITED_APPROVALS in base64.b64decode(
        next(e for e in json.loads(history)["events"] if e["eventType"] == "EVENT_TYPE_MARKER_RECORDED"
             and e["markerRecordedEventAttributes"]["markerName"] == "core_patch")
        ["markerRecordedEventAttributes"]["details"]["patch-data"]["payloads"][0]["data"]
    ).decode()


def test_compact_payload_histories_are_recorded():
    # Payloads written without their default fields (noeta.temporal.converter): every scenario, so a change
    # to decoding or to a default that recorded tasks rely on fails here too.
    shape = ROOT / "compact-payloads"
    assert {p.stem for p in shape.glob("*.json")} >= SCENARIOS | {"refusals", "resources", "mcp_tools", "budget_cost.run2"}
    started = json.loads((shape / "tool_loop.json").read_text())["events"][0]
    task_input = base64.b64decode(started["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]["data"])
    assert b'"max_retries"' not in task_input  # at its default, so left out


@pytest.mark.parametrize("path", HISTORIES, ids=[str(p.relative_to(ROOT).with_suffix("")) for p in HISTORIES])
async def test_replay(path: Path):
    failure = await replay(load(path))
    assert failure is None, f"{path.name} no longer replays: {failure}"


def test_refuse_update_histories_are_recorded():
    # A human's refusal arrives as the `refuse` update (its own name on the UI's timeline), and the
    # call a human approved is scheduled under a summary naming the approver.
    history = json.loads((ROOT / "refuse-update" / "refusals.json").read_text())
    names = [
        e["workflowExecutionUpdateAcceptedEventAttributes"]["acceptedRequest"]["input"]["name"]
        for e in history["events"] if e["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED"
    ]
    assert names == ["refuse", "approve"]
    summaries = [
        base64.b64decode(e["userMetadata"]["summary"]["data"]).decode()
        for e in history["events"] if "summary" in e.get("userMetadata", {})
    ]
    assert any(s.startswith('"approved by alice: wire_money(') for s in summaries), summaries


def test_busy_goal_histories_are_recorded():
    # A goal interrupting a running tool (the tool's cancellation requested), a message steering
    # the running goal (memo noeta.steered), and a thread started by Client.send (Update-with-Start,
    # its first goal followed by its id): python -m tests.histories.record_busy.
    folder = ROOT / "busy-goals"
    assert {p.stem for p in folder.glob("*.json")} == {"interrupt", "steer", "thread"}
    interrupt = (folder / "interrupt.json").read_text()
    assert "EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED" in interrupt and '"interrupt"' in base64_payloads(interrupt)
    assert "noeta.steered" in (folder / "steer.json").read_text()


def base64_payloads(history_json: str) -> str:
    """Every base64 payload of a history, decoded and joined (to find what the inputs said)."""
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            data = value.get("data")
            if isinstance(data, str) and value.get("metadata"):
                found.append(base64.b64decode(data).decode(errors="replace"))
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(json.loads(history_json))
    return "\n".join(found)


def test_mcp_elicitation_histories_are_recorded():
    # A remote MCP server asked a person during a tool call (PATCH_MCP_ELICITATION): the call failed
    # with the question, the task waited like an approval, then made the call again with the answer
    # (accepted with content, or declined): python -m tests.histories.record_mcp.
    folder = ROOT / PATCH_MCP_ELICITATION
    assert {p.stem for p in folder.glob("*.json")} >= {"accepted", "declined"}
    for name, update in (("accepted", "approve"), ("declined", "refuse")):
        text = (folder / f"{name}.json").read_text()
        assert text.count('"name": "noeta.invoke_tool"') == 2 and '"McpInputRequiredError"' in text
        assert PATCH_MCP_ELICITATION in base64_payloads(text) and f'"name": "{update}"' in text


def test_mcp_held_elicitation_histories_are_recorded():
    # The worker held the server's request open (PATCH_MCP_ELICITATION_HELD): "held" was answered in
    # time on that request (one tool call); "waited" was not, so the call stopped, the task waited
    # for the question listed while it was held and made the call again with the answer.
    folder = ROOT / PATCH_MCP_ELICITATION_HELD
    assert {p.stem for p in folder.glob("*.json")} >= {"held", "waited"}
    for name, calls in (("held", 1), ("waited", 2)):
        text = (folder / f"{name}.json").read_text()
        assert text.count('"name": "noeta.invoke_tool"') == calls and text.count('"name": "noeta.elicitation_held"') == 1
        assert PATCH_MCP_ELICITATION_HELD in base64_payloads(text) and '"name": "approve"' in text
        assert ('"McpInputRequiredError"' in text) == (name == "waited")


def test_mcp_login_wait_histories_are_recorded():
    # A user's login lacked a scope the call needs (PATCH_MCP_LOGIN_WAIT): the call failed with
    # McpLoginRequiredError, the task waited for the operator's new login (approve), then made the
    # call again.
    text = (ROOT / PATCH_MCP_LOGIN_WAIT / "login.json").read_text()
    assert text.count('"name": "noeta.invoke_tool"') == 2 and '"McpLoginRequiredError"' in text
    assert PATCH_MCP_LOGIN_WAIT in base64_payloads(text) and '"name": "approve"' in text


def test_mcp_sampling_histories_are_recorded():
    # A remote MCP server asked the task's model during a tool call (PATCH_MCP_SAMPLING): the call
    # failed with the request, a model call of the task answered it, the call was made again.
    text = (ROOT / PATCH_MCP_SAMPLING / "sampled.json").read_text()
    assert text.count('"name": "noeta.invoke_tool"') == 2 and text.count('"name": "noeta.call_model"') == 3
    assert '"McpSamplingRequiredError"' in text and PATCH_MCP_SAMPLING in base64_payloads(text)
