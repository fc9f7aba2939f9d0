"""The task's own events in history: its start and end, goals, approvals, memos (injections,
refusals, results, budget warnings) and sub-agents."""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.payloads import (
    child_close_attrs,
    decode,
    decode_first,
    failure_details,
    failure_text,
    innermost_message,
)
from noeta.client.projection.steps import StepEvents
from noeta.protocols import event_log as ev
from noeta.protocols.appends import (
    SUBTASK_DID_NOT_COMPLETE,
    goal_message,
    subtask_failed_block,
    subtask_result_block,
    tool_round_message,
)
from noeta.protocols.budget import Spend
from noeta.protocols.messages import Message, ToolResultBlock
from noeta.protocols.names import (
    BUDGET_WARNING_MEMO_KEY,
    INJECTED_MEMO_KEY,
    REFUSED_MEMO_KEY,
    RESULT_MEMO_KEY,
    UPDATE_APPROVE,
    UPDATE_SEND_GOAL,
)
from noeta.protocols.scope import merge_scopes
from noeta.protocols.task import (
    CONFIGURATION_ERRORS,
    ApprovalInput,
    BudgetWarningRecord,
    GoalInput,
    TaskInput,
    TaskResult,
    ToolRefusal,
    finish_denied_feedback,
    not_approved,
    refused_result,
    subtask_output,
)


class TaskEvents(StepEvents):
    """The workflow's own events (not its activities'), as envelopes."""

    def on_started(self, event: HistoryEvent) -> None:
        attrs = event.workflow_execution_started_event_attributes
        task: TaskInput = decode_first(attrs.input, TaskInput)
        self.task = task
        self.provider = task.provider
        if not self.trace_id:
            self.trace_id = task.trace_id or self.task_id
        if self.envelopes:  # a continued run: the earlier run already told the story so far
            return
        self.emit(
            ev.TaskCreated(
                goal=task.goal,
                model=task.model,
                provider=task.provider,
                tools=list(task.tools),
                max_turns=task.max_turns,
                max_retries=task.max_retries,
                limits=task.limits,
            ),
            "human",
            event,
            None,
        )
        if task.scope:
            self.emit(ev.ScopeEquipped(levels=list(task.scope), scope=merge_scopes(task.scope)), "human", event, 1)

    def on_approval(self, decision: ApprovalInput, event: HistoryEvent) -> None:
        cause = self.approval_seq.pop(decision.call_id, None)
        if decision.approved:
            payload: Any = ev.ApprovalGranted(decision.call_id, decision.approver, decision.reason)
        else:
            payload = ev.ApprovalDenied(decision.call_id, decision.approver, decision.reason)
        seq = self.emit(payload, "engine" if decision.approver == "timeout" else "human", event, cause)
        if not decision.approved and decision.call_id.startswith("finish:"):
            self.feedback(finish_denied_feedback(not_approved(decision)), event, seq)

    def on_update_accepted(self, event: HistoryEvent) -> None:
        attrs = event.workflow_execution_update_accepted_event_attributes
        if attrs.accepted_request.input.name == UPDATE_APPROVE:
            self.on_approval(decode_first(attrs.accepted_request.input.args, ApprovalInput), event)
            return
        if attrs.accepted_request.input.name != UPDATE_SEND_GOAL:
            return
        goal: GoalInput = decode_first(attrs.accepted_request.input.args, GoalInput)
        if goal.goal_id:
            if goal.goal_id in self.goal_ids:
                return  # its caller following it into a new run (see AsyncClient.send_goal)
            self.goal_ids.add(goal.goal_id)
        seq = self.emit(ev.GoalReceived(goal=goal.goal), "human", event, None, "human")
        self.queued_goals.append((goal, seq))
        if not self.goal_active:
            self.begin_next_goal(event)

    def begin_next_goal(self, event: HistoryEvent) -> None:
        goal, cause = self.queued_goals.pop(0)
        message = goal_message(goal.goal, goal.images)
        self.messages([message], "human", event, cause)
        self.goal_active = True
        self.validations_failed = 0

    def on_refused(self, refusal: ToolRefusal, event: HistoryEvent) -> None:
        """A call the workflow refused without running it (PATCH_REFUSALS_RECORDED)."""
        self.join_round(refusal.call_id, event.workflow_properties_modified_event_attributes.workflow_task_completed_event_id)
        seq = self.emit(
            ev.ToolCallRefused(
                call_id=refusal.call_id, tool_name=refusal.tool_name, arguments=refusal.arguments, reason=refusal.reason
            ),
            "engine",
            event,
            self.call_seq.get(refusal.call_id, self.last_message_seq),
        )
        self.tool_result(refused_result(refusal), "engine", event, seq)

    def on_memo(self, event: HistoryEvent) -> None:
        fields = event.workflow_properties_modified_event_attributes.upserted_memo.fields
        if REFUSED_MEMO_KEY in fields:
            self.on_refused(decode(fields[REFUSED_MEMO_KEY], ToolRefusal), event)
        if INJECTED_MEMO_KEY in fields:
            injected: list[Message] = decode(fields[INJECTED_MEMO_KEY], list[Message])
            for message in injected:
                self.messages([message], "host", event, None)
        if BUDGET_WARNING_MEMO_KEY in fields:
            warnings: list[BudgetWarningRecord] = decode(fields[BUDGET_WARNING_MEMO_KEY], list[BudgetWarningRecord])
            for warning in warnings:
                self.emit(
                    ev.BudgetWarning(limit=warning.limit, allowed=warning.allowed, used=warning.used),
                    "engine",
                    event,
                    self.last_message_seq,
                )
        if RESULT_MEMO_KEY not in fields:
            return
        result: TaskResult = decode(fields[RESULT_MEMO_KEY], TaskResult)
        self.emit(
            ev.TaskCompleted(
                answer=result.answer, status=result.status, usage=result.usage, turns=result.turns, data=result.data
            ),
            "engine",
            event,
            self.last_message_seq,
        )
        self.goal_active = False
        if self.queued_goals:
            self.begin_next_goal(event)

    def on_child_initiated(self, event: HistoryEvent) -> None:
        attrs = event.start_child_workflow_execution_initiated_event_attributes
        child: TaskInput = decode_first(attrs.input, TaskInput)
        call_id = attrs.workflow_id.rsplit("/", 1)[-1]
        agent = child.metadata.get("agent")  # set by the workflow for a declared sub-agent
        seq = self.emit(
            ev.SubtaskSpawned(call_id=call_id, goal=child.goal, child_task_id=attrs.workflow_id, agent=agent),
            "engine",
            event,
            self.call_seq.get(call_id, self.last_message_seq),
        )
        self.children[event.event_id] = (call_id, attrs.workflow_id, seq)

    def on_child_completed(self, event: HistoryEvent) -> None:
        attrs = event.child_workflow_execution_completed_event_attributes
        child = self.children.get(attrs.initiated_event_id)
        if child is None:
            return
        result: TaskResult = decode_first(attrs.result, TaskResult)
        completed = result.status == "completed"
        answer = subtask_output(result) if completed else result.answer
        self.child_closed(
            event, child, answer, completed, subtask_result_block(child[0], result), usage=result.usage, data=result.data
        )

    def on_child_ended(self, event: HistoryEvent) -> None:
        """A child that failed, or was cancelled, terminated or timed out."""
        attrs = child_close_attrs(event)
        child = self.children.get(attrs.initiated_event_id)
        if child is None:
            return
        block: ToolResultBlock | None
        if event.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED:
            answer, error_type = failure_text(attrs.failure)
            # A child's configuration error ends the parent too: no tool result reaches its model.
            fatal = error_type in CONFIGURATION_ERRORS
            block = None if fatal else subtask_failed_block(child[0], innermost_message(attrs.failure))
        elif event.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED:
            answer, block = SUBTASK_DID_NOT_COMPLETE, None  # the parent is cancelled with it
        else:
            answer, block = SUBTASK_DID_NOT_COMPLETE, subtask_failed_block(child[0], SUBTASK_DID_NOT_COMPLETE)
        self.child_closed(event, child, answer, False, block)

    def child_closed(
        self, event: HistoryEvent, child: tuple[str, str, int], answer: str, success: bool,
        block: ToolResultBlock | None, *, usage: Any = None, data: Any = None,
    ) -> None:
        """SubtaskCompleted, then (unless it ended the parent too) the tool result its parent's
        model got, built as AgentWorkflow builds it."""
        call_id, child_id, seq = child
        seq = self.emit(
            ev.SubtaskCompleted(
                call_id=call_id, child_task_id=child_id, success=success, answer=answer, usage=usage, data=data
            ),
            f"subtask:{child_id}",
            event,
            seq,
        )
        if block is not None:
            self.messages([tool_round_message([block])], f"subtask:{child_id}", event, seq)

    def on_closed(self, event: HistoryEvent) -> None:
        t = event.event_type
        if t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            failure = event.workflow_execution_failed_event_attributes.failure
            message, error_type = failure_text(failure)
            if error_type == "AttemptsExhaustedError":
                details = failure_details(failure)
                self.emit(
                    ev.AttemptsExhausted(
                        attempts=int(details.get("attempts", 0)),
                        issues=list(details.get("issues", [])),
                        last_failure_type=str(details.get("last_failure_type", "")),
                    ),
                    "engine",
                    event,
                    self.last_message_seq,
                )
            elif error_type == "BudgetExceededError":
                self.emit_budget_exceeded(failure_details(failure), event)
            self.emit(ev.TaskFailed(reason=message, error_type=error_type), "engine", event, self.last_message_seq)
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
            self.emit(ev.TaskFailed(reason="workflow timed out", error_type="TimeoutError"), "engine", event, None)
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
            reason = event.workflow_execution_terminated_event_attributes.reason or "terminated"
            self.emit(ev.TaskFailed(reason=f"terminated: {reason}", error_type="Terminated"), "engine", event, None)
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
            self.emit(ev.TaskCancelled(), "human", event, None)
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            attrs = event.workflow_execution_continued_as_new_event_attributes
            self.emit(ev.TaskContinuedAsNew(new_run_id=attrs.new_execution_run_id or None), "engine", event, None)

    def emit_budget_exceeded(self, details: dict[str, Any], event: HistoryEvent) -> None:
        spend = Spend.from_details(details.get("spend")) or Spend()
        self.emit(
            ev.BudgetExceeded(
                limit=str(details.get("limit", "")),
                allowed=float(details.get("allowed", 0)),
                used=float(details.get("used", 0)),
                usage=spend.usage,
                model_calls=spend.counts.model_calls,
                tool_calls=spend.counts.tool_calls,
            ),
            "engine",
            event,
            self.last_message_seq,
        )

