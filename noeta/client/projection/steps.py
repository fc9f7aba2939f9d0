"""Activities and local activities in history: model calls, tool calls, guards, validation,
prepare and release, with their retries."""

from __future__ import annotations

import json

from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.payloads import decode_first, failure_details, failure_text, innermost_message
from noeta.client.projection.state import LOCAL_ACTIVITY_MARKER, ProjectionState, _Scheduled, _ToolRound
from noeta.protocols import event_log as ev
from noeta.protocols.appends import goal_message, tool_result_block
from noeta.protocols.hooks import GuardDecision, ProposedToolCall, combine
from noeta.protocols.messages import Message, ToolResultBlock
from noeta.protocols.names import (
    CALL_MODEL,
    CHECK_GUARDS,
    INVOKE_TOOL,
    PREPARE_TASK,
    RELEASE_RESOURCES,
    VALIDATE_OUTPUT,
)
from noeta.protocols.task import (
    TASK_FATAL_TOOL_ERRORS,
    AttemptFailure,
    CallModelInput,
    CallModelOutput,
    CheckGuardsInput,
    CheckGuardsOutput,
    InvokeToolInput,
    InvokeToolOutput,
    PrepareOutput,
    ReleaseOutput,
    ValidateOutput,
    denied_by_guard,
    finish_denied_feedback,
    tool_failed_text,
    validation_feedback,
)


class StepEvents(ProjectionState):
    """The steps AgentWorkflow schedules, as envelopes."""

    def on_scheduled(self, event: HistoryEvent) -> None:
        attrs = event.activity_task_scheduled_event_attributes
        name = attrs.activity_type.name
        inp: CallModelInput | InvokeToolInput | None = None
        if name == CALL_MODEL:
            model_call: CallModelInput = decode_first(attrs.input, CallModelInput)
            inp = model_call
            seq = self.emit(
                ev.ProviderCallStarted(
                    provider=model_call.provider, model=model_call.model, turn=model_call.turn,
                    messages_appended=len(model_call.append),
                ),
                "engine",
                event,
                self.last_message_seq,
            )
        elif name == INVOKE_TOOL:
            tool_call: InvokeToolInput = decode_first(attrs.input, InvokeToolInput)
            inp = tool_call
            self.join_round(tool_call.call_id, attrs.workflow_task_completed_event_id)
            seq = self.emit(
                ev.ToolCallStarted(call_id=tool_call.call_id, tool_name=tool_call.tool_name, arguments=tool_call.arguments),
                "engine",
                event,
                self.call_seq.get(tool_call.call_id),
            )
        else:
            seq = self.last_message_seq or 1
            if name == CHECK_GUARDS:  # a guarded round: its calls may start in later workflow tasks
                checked: CheckGuardsInput = decode_first(attrs.input, CheckGuardsInput)
                calls = [a.call_id for a in checked.actions if isinstance(a, ProposedToolCall)]
                self.round = _ToolRound(expected=calls, guarded=True) if calls else None
        self.scheduled[event.event_id] = _Scheduled(name, inp, seq)

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

