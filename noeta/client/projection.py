"""Workflow history -> EventEnvelopes. A pure function: the same history gives the same stream.

The history is the only event store. Each AgentWorkflow history event that means something to the
agent becomes one or more envelopes; ``seq`` is assigned in projection order, gap-free from 1 and
continuing across the runs of one task.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timezone
from typing import Any

from pydantic import TypeAdapter
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent

from noeta.protocols import event_log as ev
from noeta.protocols.appends import (
    SUBTASK_DID_NOT_COMPLETE,
    engine_feedback,
    goal_message,
    recalled_messages,
    subtask_failed_block,
    subtask_result_block,
    tool_result_block,
    tool_round_message,
)
from noeta.protocols.budget import Spend
from noeta.protocols.hooks import GuardDecision, ProposedToolCall, combine
from noeta.protocols.messages import Message, ToolResultBlock
from noeta.protocols.names import (
    APPROVAL_TIMER_PREFIX,
    BUDGET_WARNING_MEMO_KEY,
    CALL_MODEL,
    CHECK_GUARDS,
    INJECTED_MEMO_KEY,
    INVOKE_TOOL,
    PREPARE_TASK,
    REFUSED_MEMO_KEY,
    RELEASE_RESOURCES,
    RESULT_MEMO_KEY,
    UPDATE_APPROVE,
    UPDATE_SEND_GOAL,
    VALIDATE_OUTPUT,
)
from noeta.protocols.scope import merge_scopes
from noeta.protocols.task import (
    CONFIGURATION_ERRORS,
    TASK_FATAL_TOOL_ERRORS,
    ApprovalInput,
    AttemptFailure,
    BudgetWarningRecord,
    CallModelInput,
    CallModelOutput,
    CheckGuardsInput,
    CheckGuardsOutput,
    GoalInput,
    InvokeToolInput,
    InvokeToolOutput,
    PrepareOutput,
    ReleaseOutput,
    TaskInput,
    TaskResult,
    ToolRefusal,
    ValidateOutput,
    approval_timed_out,
    denied_by_guard,
    finish_denied_feedback,
    not_approved,
    refused_result,
    subtask_output,
    tool_failed_text,
    validation_feedback,
)

_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _decode(payload: Payload, cls: type) -> Any:
    if payload.metadata.get("encoding") == b"binary/null":
        return None
    adapter = _ADAPTERS.get(cls) or _ADAPTERS.setdefault(cls, TypeAdapter(cls))
    return adapter.validate_python(json.loads(payload.data))


def decode_first(payloads: Payloads, cls: type) -> Any:
    return _decode(payloads.payloads[0], cls) if payloads.payloads else None


def _application_failure(failure: Failure) -> Failure:
    """The outermost ApplicationError of a failure chain (an activity failure wraps one), else the
    innermost failure."""
    while not failure.HasField("application_failure_info") and failure.HasField("cause"):
        failure = failure.cause
    return failure


def failure_details(failure: Failure) -> dict[str, Any]:
    """The first detail of that ApplicationError (Noeta puts a dict there), or {}."""
    node = _application_failure(failure)
    payloads = node.application_failure_info.details.payloads if node.HasField("application_failure_info") else []
    value = json.loads(payloads[0].data) if payloads else None
    return value if isinstance(value, dict) else {}


def innermost_message(failure: Failure) -> str:
    """The deepest cause's message (what AgentWorkflow's ``failure_message`` reports)."""
    while failure.HasField("cause"):
        failure = failure.cause
    return failure.message or "failed"


def failure_text(failure: Failure) -> tuple[str, str | None]:
    """(message, ApplicationError type) of that ApplicationError."""
    node = _application_failure(failure)
    error_type = node.application_failure_info.type if node.HasField("application_failure_info") else None
    return node.message or "failed", error_type or None


@dataclass
class _ToolRound:
    """The tool calls of one CallTools decision: the workflow appends their results as one message,
    in call order, once all are done, whatever order they finish in."""

    expected: list[str]
    guarded: bool
    workflow_task: int | None = None
    results: dict[str, ToolResultBlock] = field(default_factory=dict)
    memories: dict[str, list[str]] = field(default_factory=dict)
    """What the memory tool recalled, by call: it follows the round's results (origin "memory")."""


#: The marker temporalio records for a completed local activity (details "data" and "result").
LOCAL_ACTIVITY_MARKER = "core_local_activity"


@dataclass
class _Scheduled:
    activity: str
    input: Any
    seq: int


@dataclass
class Projector:
    """Incremental projection: feed history events in order, get the new envelopes back."""

    task_id: str
    envelopes: list[ev.EventEnvelope] = field(default_factory=list)
    trace_id: str = ""
    provider: str = ""
    task: TaskInput | None = None
    scheduled: dict[int, _Scheduled] = field(default_factory=dict)
    children: dict[int, tuple[str, str, int]] = field(default_factory=dict)
    last_message_seq: int | None = None
    call_seq: dict[str, int] = field(default_factory=dict)  # call_id -> seq of the message asking for it
    started_attempt: dict[int, int] = field(default_factory=dict)
    # The workflow takes goals one at a time, in order: a goal accepted while another is running
    # enters the transcript when the running one ends (mirrors AgentWorkflow.run).
    goal_active: bool = True
    queued_goals: list[tuple[GoalInput, int]] = field(default_factory=list)
    validations_failed: int = 0  # in the current goal
    round: _ToolRound | None = None
    goal_ids: set[str] = field(default_factory=set)
    approval_seq: dict[str, int] = field(default_factory=dict)  # pending approvals: call id -> request seq
    approval_timers: dict[str, tuple[str, float]] = field(default_factory=dict)  # timer id -> (call id, timeout)

    def emit(
        self,
        payload: Any,
        actor: str,
        event: HistoryEvent,
        causation: int | None,
        origin: str | None = None,
    ) -> int:
        seq = len(self.envelopes) + 1
        self.envelopes.append(
            ev.EventEnvelope(
                seq=seq,
                type=type(payload).__name__,
                actor=actor,
                origin=origin,  # type: ignore[arg-type]
                trace_id=self.trace_id,
                causation_id=causation,
                payload=payload,
                task_id=self.task_id,
                # Timezone-aware (UTC), so JSON/SSE consumers never guess.
                timestamp=event.event_time.ToDatetime(tzinfo=timezone.utc) if event.HasField("event_time") else None,
                history_event_id=event.event_id,
            )
        )
        return seq

    def messages(self, messages: list[Message], actor: str, event: HistoryEvent, cause: int | None) -> int:
        origin = messages[0].origin if messages else None
        seq = self.emit(ev.MessagesAppended(messages=messages), actor, event, cause, origin)
        self.last_message_seq = seq
        for message in messages:
            for call in message.tool_uses:
                proposed = ev.ToolCallProposed(call_id=call.call_id, tool_name=call.tool_name, arguments=call.arguments)
                self.call_seq[call.call_id] = self.emit(proposed, actor, event, seq)
        return seq

    def feedback(self, text: str, event: HistoryEvent, cause: int) -> None:
        """A message the engine adds for the model (origin "system"), mirroring AgentWorkflow."""
        self.messages([engine_feedback(text)], "engine", event, cause)

    # -- per event ------------------------------------------------------------------------------

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

    def on_scheduled(self, event: HistoryEvent) -> None:
        attrs = event.activity_task_scheduled_event_attributes
        name = attrs.activity_type.name
        if name == CALL_MODEL:
            inp: CallModelInput = decode_first(attrs.input, CallModelInput)
            seq = self.emit(
                ev.ProviderCallStarted(
                    provider=inp.provider, model=inp.model, turn=inp.turn, messages_appended=len(inp.append)
                ),
                "engine",
                event,
                self.last_message_seq,
            )
        elif name == INVOKE_TOOL:
            inp = decode_first(attrs.input, InvokeToolInput)
            self.join_round(inp.call_id, attrs.workflow_task_completed_event_id)
            seq = self.emit(
                ev.ToolCallStarted(call_id=inp.call_id, tool_name=inp.tool_name, arguments=inp.arguments),
                "engine",
                event,
                self.call_seq.get(inp.call_id),
            )
        else:
            inp, seq = None, self.last_message_seq or 1
            if name == CHECK_GUARDS:  # a guarded round: its calls may start in later workflow tasks
                checked: CheckGuardsInput = decode_first(attrs.input, CheckGuardsInput)
                calls = [a.call_id for a in checked.actions if isinstance(a, ProposedToolCall)]
                self.round = _ToolRound(expected=calls, guarded=True) if calls else None
        self.scheduled[event.event_id] = _Scheduled(name, inp, seq)

    def join_round(self, call_id: str, workflow_task: int) -> None:
        current = self.round
        if current is not None and call_id in current.expected:
            return
        if current is not None and not current.guarded and current.workflow_task == workflow_task:
            current.expected.append(call_id)  # scheduled together, in call order
            return
        self.round = _ToolRound(expected=[call_id], guarded=False, workflow_task=workflow_task)

    def tool_result(
        self, block: ToolResultBlock, actor: str, event: HistoryEvent, cause: int, memories: list[str] | None = None
    ) -> None:
        current = self.round
        if current is None or block.call_id not in current.expected:
            seq = self.messages([tool_round_message([block])], actor, event, cause)
            self.recalled(memories or [], event, seq)
            return
        current.results[block.call_id] = block
        current.memories[block.call_id] = memories or []
        if len(current.results) == len(current.expected):
            self.round = None
            blocks = [current.results[c] for c in current.expected]
            seq = self.messages([tool_round_message(blocks)], actor, event, cause)
            self.recalled([m for c in current.expected for m in current.memories[c]], event, seq)

    def recalled(self, memories: list[str], event: HistoryEvent, cause: int) -> None:
        """Memories the memory tool recalled, as AgentWorkflow appends them after the results."""
        if memories:
            self.messages(recalled_messages(memories), "engine", event, cause)

    def on_prepared(self, plan: PrepareOutput, event: HistoryEvent) -> None:
        """prepare_task's result: the context plan, then the goal as the first message."""
        assert self.task is not None
        seq = self.emit(
            ev.ContextPlanComposed(
                system_prompt_chars=len(self.task.system_prompt or ""),
                tools=[t.name for t in plan.tools],
                tool_fingerprints={t.name: t.fingerprint for t in plan.tools},
                cached_prefix_chars=plan.plan.system_chars if plan.plan else len(self.task.system_prompt or ""),
                volatile_chars=plan.plan.volatile_chars if plan.plan else 0,
                channels=[ev.ContextChannel(c.name, c.stable, c.chars) for c in plan.plan.channels]
                if plan.plan
                else [],
            ),
            "engine",
            event,
            1,
        )
        if plan.resources or self.task.inherited_resources:
            self.emit(
                ev.ResourcesEquipped(
                    owned=[r.key for r in plan.resources],
                    exposed=[r.key for r in plan.resources if r.expose],
                    inherited=dict(self.task.inherited_resources),
                ),
                "engine",
                event,
                seq,
            )
        self.messages([goal_message(self.task.goal, self.task.images)], "human", event, seq)

    def on_local_activity(self, event: HistoryEvent) -> None:
        """A local activity's marker (prepare_task since PATCH_LEAN_STEPS); other markers are not ours."""
        attrs = event.marker_recorded_event_attributes
        if attrs.marker_name != LOCAL_ACTIVITY_MARKER or "result" not in attrs.details:
            return
        data = json.loads(attrs.details["data"].payloads[0].data)
        if data.get("activity_type") == PREPARE_TASK:
            self.on_prepared(decode_first(attrs.details["result"], PrepareOutput), event)
        elif data.get("activity_type") == RELEASE_RESOURCES:
            out: ReleaseOutput = decode_first(attrs.details["result"], ReleaseOutput)
            self.emit(ev.ResourcesReleased(released=out.released, errors=out.errors), "engine", event, None)

    def on_activity_started(self, event: HistoryEvent) -> None:
        attrs = event.activity_task_started_event_attributes
        self.started_attempt[attrs.scheduled_event_id] = attrs.attempt

    def on_completed(self, event: HistoryEvent) -> None:
        attrs = event.activity_task_completed_event_attributes
        sched = self.scheduled.get(attrs.scheduled_event_id)
        if sched is None:
            return
        if sched.activity == PREPARE_TASK:
            self.on_prepared(decode_first(attrs.result, PrepareOutput), event)
        elif sched.activity == CALL_MODEL:
            out: CallModelOutput = decode_first(attrs.result, CallModelOutput)
            actor = f"provider:{self.provider}"
            for failed in out.retried:
                self.emit_provider_retry(failed, event, sched.seq)
            seq = self.emit(
                ev.ProviderCallCompleted(
                    provider=self.provider,
                    stop_reason=out.response.stop_reason,
                    usage=out.response.usage,
                    attempt=out.attempt,
                ),
                actor,
                event,
                sched.seq,
            )
            self.messages([Message(role="assistant", content=out.response.content)], actor, event, seq)
        elif sched.activity == INVOKE_TOOL:
            inp: InvokeToolInput = sched.input
            result = decode_first(attrs.result, InvokeToolOutput)
            actor = f"tool:{inp.tool_name}"
            for failed in result.retried:
                self.emit_tool_retry(inp, failed, event, sched.seq)
            for used in result.resource_calls:
                self.emit(
                    ev.ResourceCallObserved(
                        call_id=inp.call_id, tool_name=inp.tool_name, resource=used.resource, op=used.op,
                        duration_ms=used.duration_ms, outcome=used.outcome, error_type=used.error_type,
                        fields=used.fields,
                    ),
                    f"resource:{used.resource}",
                    event,
                    sched.seq,
                )
            seq = self.emit(
                ev.ToolCallCompleted(
                    call_id=inp.call_id,
                    tool_name=inp.tool_name,
                    success=result.result.success,
                    attempt=result.attempt,
                    summary=result.result.summary,
                    resource_calls_dropped=result.resource_calls_dropped,
                ),
                actor,
                event,
                sched.seq,
            )
            self.tool_result(tool_result_block(inp.call_id, result.result), actor, event, seq, result.memories)
        elif sched.activity == VALIDATE_OUTPUT:
            checked: ValidateOutput = decode_first(attrs.result, ValidateOutput)
            if checked.ok:
                return
            self.validations_failed += 1
            issue = checked.issue or "Validation failed"
            seq = self.emit(
                ev.ValidationFailed(
                    attempt=self.validations_failed, failure_type=checked.failure_type or "validator", issue=issue
                ),
                "engine",
                event,
                self.last_message_seq,
            )
            assert self.task is not None
            if self.validations_failed <= self.task.max_retries:  # else the task fails (see AgentWorkflow)
                self.feedback(validation_feedback(issue), event, seq)
        elif sched.activity == CHECK_GUARDS:
            self.on_guard_verdicts(decode_first(attrs.result, CheckGuardsOutput), event)

    def on_guard_verdicts(self, out: CheckGuardsOutput, event: HistoryEvent) -> None:
        by_action: dict[str, list[GuardDecision]] = {}
        for v in out.verdicts:
            by_action.setdefault(v.call_id, []).append(v)
            self.emit(
                ev.GuardVerdict(call_id=v.call_id, guard=v.guard, verdict=v.verdict, reason=v.reason),
                f"guard:{v.guard}",
                event,
                self.call_seq.get(v.call_id, self.last_message_seq),
            )
        for call_id, verdicts in by_action.items():
            deciding = combine(verdicts)
            if deciding is None:
                continue
            seq = len(self.envelopes)
            if deciding.verdict == "ask":
                seq = self.emit(
                    ev.ApprovalRequested(call_id=call_id, guard=deciding.guard, reason=deciding.reason),
                    "engine",
                    event,
                    seq,
                )
                self.approval_seq[call_id] = seq
            elif call_id.startswith("finish:"):
                self.feedback(finish_denied_feedback(denied_by_guard(deciding.guard, deciding.reason)), event, seq)

    def on_approval(self, decision: ApprovalInput, event: HistoryEvent) -> None:
        cause = self.approval_seq.pop(decision.call_id, None)
        if decision.approved:
            payload: Any = ev.ApprovalGranted(decision.call_id, decision.approver, decision.reason)
        else:
            payload = ev.ApprovalDenied(decision.call_id, decision.approver, decision.reason)
        seq = self.emit(payload, "engine" if decision.approver == "timeout" else "human", event, cause)
        if not decision.approved and decision.call_id.startswith("finish:"):
            self.feedback(finish_denied_feedback(not_approved(decision)), event, seq)

    def emit_provider_retry(self, failed: AttemptFailure, event: HistoryEvent, cause: int) -> None:
        self.emit(
            ev.ProviderCallRetried(
                provider=self.provider,
                attempt=failed.attempt,
                error=failed.error,
                error_type=failed.error_type,
                retry_after=failed.retry_after,
            ),
            f"provider:{self.provider}",
            event,
            cause,
        )

    def emit_tool_retry(self, call: InvokeToolInput, failed: AttemptFailure, event: HistoryEvent, cause: int) -> None:
        self.emit(
            ev.ToolCallRetried(
                call_id=call.call_id,
                tool_name=call.tool_name,
                attempt=failed.attempt,
                error=failed.error,
                error_type=failed.error_type,
            ),
            f"tool:{call.tool_name}",
            event,
            cause,
        )

    def on_activity_failed(self, event: HistoryEvent, failure: Failure, scheduled_id: int) -> None:
        sched = self.scheduled.get(scheduled_id)
        if sched is None:
            return
        message, error_type = failure_text(failure)
        attempt = self.started_attempt.get(scheduled_id, 1)
        earlier = [AttemptFailure(**f) for f in failure_details(failure).get("attempt_failures", [])][:-1]
        if sched.activity == CALL_MODEL:
            for failed in earlier:
                self.emit_provider_retry(failed, event, sched.seq)
            self.emit(
                ev.ProviderCallFailed(provider=self.provider, error=message, error_type=error_type, attempt=attempt),
                f"provider:{self.provider}",
                event,
                sched.seq,
            )
        elif sched.activity == INVOKE_TOOL:
            inp: InvokeToolInput = sched.input
            actor = f"tool:{inp.tool_name}"
            for failed in earlier:
                self.emit_tool_retry(inp, failed, event, sched.seq)
            seq = self.emit(
                ev.ToolCallFailed(
                    call_id=inp.call_id, tool_name=inp.tool_name, error=message, error_type=error_type, attempt=attempt
                ),
                actor,
                event,
                sched.seq,
            )
            if error_type not in TASK_FATAL_TOOL_ERRORS:  # the model is told; see AgentWorkflow
                text = tool_failed_text(inp.tool_name, innermost_message(failure))
                block = ToolResultBlock(call_id=inp.call_id, output=text, success=False, error=text)
                self.tool_result(block, actor, event, seq)

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
            self.on_refused(_decode(fields[REFUSED_MEMO_KEY], ToolRefusal), event)
        if INJECTED_MEMO_KEY in fields:
            injected: list[Message] = _decode(fields[INJECTED_MEMO_KEY], list[Message])
            for message in injected:
                self.messages([message], "host", event, None)
        if BUDGET_WARNING_MEMO_KEY in fields:
            warnings: list[BudgetWarningRecord] = _decode(fields[BUDGET_WARNING_MEMO_KEY], list[BudgetWarningRecord])
            for warning in warnings:
                self.emit(
                    ev.BudgetWarning(limit=warning.limit, allowed=warning.allowed, used=warning.used),
                    "engine",
                    event,
                    self.last_message_seq,
                )
        if RESULT_MEMO_KEY not in fields:
            return
        result: TaskResult = _decode(fields[RESULT_MEMO_KEY], TaskResult)
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

    def on_child_closed(
        self, event: HistoryEvent, initiated_id: int, answer: str, success: bool, block: ToolResultBlock | None, *,
        usage: Any = None, data: Any = None,
    ) -> None:
        """A child ended: SubtaskCompleted, then (unless it ended the parent too) the tool result
        its parent's model got, built as AgentWorkflow builds it."""
        if initiated_id not in self.children:
            return
        call_id, child_id, seq = self.children[initiated_id]
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

    def begin_run(self) -> None:
        """A new run of the task starts (continue-as-new): ids in its history start over."""
        self.scheduled.clear()
        self.children.clear()
        self.started_attempt.clear()

    def feed(self, event: HistoryEvent) -> list[ev.EventEnvelope]:
        before = len(self.envelopes)
        self._feed(event)
        return self.envelopes[before:]

    def _feed(self, event: HistoryEvent) -> None:
        t = event.event_type
        E = EventType
        if t == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            self.on_started(event)
        elif t == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            self.on_scheduled(event)
        elif t == E.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            self.on_activity_started(event)
        elif t == E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            self.on_completed(event)
        elif t == E.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            a = event.activity_task_failed_event_attributes
            self.on_activity_failed(event, a.failure, a.scheduled_event_id)
        elif t == E.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
            a2 = event.activity_task_timed_out_event_attributes
            self.on_activity_failed(event, a2.failure, a2.scheduled_event_id)
        elif t == E.EVENT_TYPE_TIMER_STARTED:
            summary = event.user_metadata.summary if event.HasField("user_metadata") else None
            text = json.loads(summary.data) if summary is not None and summary.data else ""
            if isinstance(text, str) and text.startswith(APPROVAL_TIMER_PREFIX):
                attrs_t = event.timer_started_event_attributes
                timeout = attrs_t.start_to_fire_timeout.ToTimedelta().total_seconds()
                self.approval_timers[attrs_t.timer_id] = (text[len(APPROVAL_TIMER_PREFIX):], timeout)
        elif t == E.EVENT_TYPE_TIMER_FIRED:
            timer = self.approval_timers.pop(event.timer_fired_event_attributes.timer_id, None)
            if timer is not None and timer[0] in self.approval_seq:
                self.on_approval(approval_timed_out(*timer), event)
        elif t == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            self.on_update_accepted(event)
        elif t == E.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
            self.on_memo(event)
        elif t == E.EVENT_TYPE_MARKER_RECORDED:
            self.on_local_activity(event)
        elif t == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            self.on_child_initiated(event)
        elif t == E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
            a3 = event.child_workflow_execution_completed_event_attributes
            result: TaskResult = decode_first(a3.result, TaskResult)
            completed = result.status == "completed"
            call_id = self.children[a3.initiated_event_id][0] if a3.initiated_event_id in self.children else ""
            self.on_child_closed(
                event, a3.initiated_event_id, subtask_output(result) if completed else result.answer, completed,
                subtask_result_block(call_id, result), usage=result.usage, data=result.data,
            )
        elif t in (
            E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
            E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED,
            E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED,
            E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
        ):
            attrs = _child_close_attrs(event)
            initiated = attrs.initiated_event_id
            call_id = self.children[initiated][0] if initiated in self.children else ""
            block: ToolResultBlock | None
            if t == E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED:
                answer, error_type = failure_text(attrs.failure)
                # A child's configuration error ends the parent too: no tool result reaches its model.
                fatal = error_type in CONFIGURATION_ERRORS
                block = None if fatal else subtask_failed_block(call_id, innermost_message(attrs.failure))
            elif t == E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED:
                answer, block = SUBTASK_DID_NOT_COMPLETE, None  # the parent is cancelled with it
            else:
                answer = SUBTASK_DID_NOT_COMPLETE
                block = subtask_failed_block(call_id, SUBTASK_DID_NOT_COMPLETE)
            self.on_child_closed(event, initiated, answer, False, block)
        else:
            self.on_closed(event)


def _child_close_attrs(event: HistoryEvent) -> Any:
    for name in (
        "child_workflow_execution_failed_event_attributes",
        "child_workflow_execution_canceled_event_attributes",
        "child_workflow_execution_terminated_event_attributes",
        "child_workflow_execution_timed_out_event_attributes",
    ):
        if event.HasField(name):
            return getattr(event, name)
    raise ValueError("not a child close event")


def project(
    history: Iterable[HistoryEvent] | Sequence[Iterable[HistoryEvent]], task_id: str = ""
) -> list[ev.EventEnvelope]:
    """Project the history of a task (one run, or its runs in order) into envelopes."""
    items = list(history)
    runs: list[Iterable[HistoryEvent]] = [items] if not items or isinstance(items[0], HistoryEvent) else items  # type: ignore[list-item]
    projector = Projector(task_id=task_id)
    for run in runs:
        projector.begin_run()
        for event in run:
            projector.feed(event)
    return projector.envelopes

