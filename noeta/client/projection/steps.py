"""Activities and local activities in history: model calls, tool calls, guards, validation,
prepare and release, with their retries."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.approvals import Approvals
from noeta.client.projection.goals import Goals
from noeta.client.projection.local_tools import local_tool_call, marker_data
from noeta.client.projection.log import EnvelopeLog
from noeta.client.projection.model_calls import ModelCalls
from noeta.client.projection.payloads import (
    decode_first,
    earlier_attempts,
    failure_details,
    failure_text,
    innermost_message,
    own_error_type,
    retry_fields,
)
from noeta.client.projection.rounds import ToolRounds
from noeta.client.projection.transcript import Transcript
from noeta.protocols import event_log as ev
from noeta.protocols.activity_io import (
    CallModelInput,
    CallModelOutput,
    CheckGuardsInput,
    CheckGuardsOutput,
    CompactContextInput,
    CompactContextOutput,
    InvokeToolInput,
    InvokeToolOutput,
    PrepareOutput,
    ReleaseOutput,
    ValidateOutput,
)
from noeta.protocols.appends import goal_message, tool_result_block
from noeta.protocols.elicitation import INPUT_REQUIRED
from noeta.protocols.held_questions import HeldQuestion
from noeta.protocols.login_wait import LOGIN_REQUIRED
from noeta.protocols.sampling import SAMPLING_REQUIRED
from noeta.protocols.hooks import GuardDecision, ProposedToolCall, combine
from noeta.protocols.local_model_calls import ModelCallStart
from noeta.protocols.scoring import ScoreOutput, mean_value
from noeta.protocols.names import (
    CALL_MODEL,
    CHECK_GUARDS,
    COMPACT_CONTEXT,
    INVOKE_TOOL,
    PREPARE_TASK,
    RELEASE_RESOURCES,
    SCORE_TASK,
    VALIDATE_OUTPUT,
)
from noeta.protocols.step_failures import (
    failed_tool_result,
    tool_failure_ends_task,
    validation_failure_type,
    validation_gives_up,
    validation_issue,
)
from noeta.protocols.task import AttemptFailure, TaskInput, denied_by_guard, finish_denied_feedback, validation_feedback

def context_compacted(inp: CompactContextInput, out: CompactContextOutput) -> ev.ContextCompacted:
    """The event of a compaction that changed what the model sees."""
    return ev.ContextCompacted(
        strategy=out.strategy, reason=inp.reason, tokens_before=out.tokens_before, tokens_after=out.tokens_after,
        turns_folded=out.turns_folded, messages_folded=out.messages_folded, summary=out.summary,
        summary_ref=out.summary_ref, usage=out.usage, attempt=out.attempt, window_tokens=inp.window_tokens,
    )


#: The marker temporalio records for a completed local activity (details "data" and "result").
LOCAL_ACTIVITY_MARKER = "core_local_activity"


@dataclass(frozen=True)
class _Scheduled:
    activity: str
    input: Any
    seq: int
    """The envelope its outcome points at."""


class Steps:
    """The steps AgentWorkflow schedules, as envelopes: what it asked for when scheduled, what came
    back (with the attempts that failed first) when done."""

    def __init__(
        self, log: EnvelopeLog, transcript: Transcript, rounds: ToolRounds, goals: Goals, approvals: Approvals
    ) -> None:
        """Records into ``log``; the other parts give causes, tool rounds, the running goal and approvals."""
        self.log = log
        """The event log this records into (local tool calls write there too)."""
        self._transcript = transcript
        self._rounds = rounds
        self._goals = goals
        self._approvals = approvals
        self._models = ModelCalls(log, transcript)
        self._task: TaskInput | None = None
        self._scheduled: dict[int, _Scheduled] = {}  # by the id of the event that scheduled it
        self._attempt: dict[int, int] = {}  # scheduled event id -> the attempt that started last

    @property
    def task(self) -> TaskInput:
        """The input of the run being projected."""
        assert self._task is not None, "a run's steps follow its start"
        return self._task

    def begin_run(self) -> None:
        """A new run: event ids in its history start over."""
        self._scheduled.clear()
        self._attempt.clear()

    def run_started(self, task: TaskInput) -> None:
        """The run's input, which its steps are read against."""
        self._task = task

    def scheduled(self, event: HistoryEvent) -> None:
        """An activity was scheduled: model and tool calls start here."""
        attrs = event.activity_task_scheduled_event_attributes
        name = attrs.activity_type.name
        inp: CallModelInput | InvokeToolInput | CompactContextInput | None = None
        if name == CALL_MODEL:
            model_call: CallModelInput = decode_first(attrs.input, CallModelInput)
            inp = model_call
            seq = self._models.started(ModelCallStart.of(model_call), event)
        elif name == INVOKE_TOOL:
            tool_call: InvokeToolInput = decode_first(attrs.input, InvokeToolInput)
            inp = tool_call
            self._rounds.join(tool_call.call_id, attrs.workflow_task_completed_event_id)
            seq = self.log.emit(
                ev.ToolCallStarted(call_id=tool_call.call_id, tool_name=tool_call.tool_name, arguments=tool_call.arguments),
                "engine",
                event,
                self._transcript.proposal(tool_call.call_id),
            )
        else:
            seq = self._transcript.last_message_seq or 1
            if name == COMPACT_CONTEXT:
                inp = decode_first(attrs.input, CompactContextInput)
            if name == CHECK_GUARDS:  # a guarded round: its calls may start in later workflow tasks
                checked: CheckGuardsInput = decode_first(attrs.input, CheckGuardsInput)
                self._rounds.guarded([a.call_id for a in checked.actions if isinstance(a, ProposedToolCall)])
        self._scheduled[event.event_id] = _Scheduled(name, inp, seq)

    def local_activity(self, event: HistoryEvent) -> None:
        """A local activity's marker (prepare_task since PATCH_LEAN_STEPS, a local tool's call since
        PATCH_LOCAL_TOOLS, a model call since PATCH_LOCAL_MODEL_CALLS, also when it failed); other
        markers are not ours."""
        attrs = event.marker_recorded_event_attributes
        if attrs.marker_name != LOCAL_ACTIVITY_MARKER or "data" not in attrs.details:
            return
        data = marker_data(attrs)
        if "result" not in attrs.details and data.get("activity_type") not in (INVOKE_TOOL, CALL_MODEL):
            return
        if data.get("backoff"):  # a failed attempt retried after a timer: the call goes on, and its
            return  # next marker lists this attempt among its retries
        if data.get("activity_type") == CALL_MODEL:
            self._models.local_call(attrs, data, event)
        elif data.get("activity_type") == PREPARE_TASK:
            self._prepared(decode_first(attrs.details["result"], PrepareOutput), event)
        elif data.get("activity_type") == INVOKE_TOOL:
            local_tool_call(self, self._transcript, self._rounds, attrs, data, event)
        elif data.get("activity_type") == RELEASE_RESOURCES:
            out: ReleaseOutput = decode_first(attrs.details["result"], ReleaseOutput)
            self.log.emit(ev.ResourcesReleased(released=out.released, errors=out.errors), "engine", event, None)

    def attempt_started(self, event: HistoryEvent) -> None:
        """Remember which attempt of a scheduled activity started (its completion reports it)."""
        attrs = event.activity_task_started_event_attributes
        self._attempt[attrs.scheduled_event_id] = attrs.attempt

    def completed(self, event: HistoryEvent) -> None:
        """An activity returned."""
        attrs = event.activity_task_completed_event_attributes
        sched = self._scheduled.get(attrs.scheduled_event_id)
        if sched is None:
            return
        if sched.activity == PREPARE_TASK:
            self._prepared(decode_first(attrs.result, PrepareOutput), event)
        elif sched.activity == CALL_MODEL:
            self._models.answered(
                decode_first(attrs.result, CallModelOutput), sched.input.provider, event, sched.seq,
                sampling=sched.input.sampling,
            )
        elif sched.activity == INVOKE_TOOL:
            inp = sched.input
            self.tool_returned(inp.call_id, inp.tool_name, decode_first(attrs.result, InvokeToolOutput), event, sched.seq)
        elif sched.activity == VALIDATE_OUTPUT:
            self._validated(decode_first(attrs.result, ValidateOutput), event)
        elif sched.activity == CHECK_GUARDS:
            self._guard_verdicts(decode_first(attrs.result, CheckGuardsOutput), event)
        elif sched.activity == COMPACT_CONTEXT:
            out: CompactContextOutput = decode_first(attrs.result, CompactContextOutput)
            if out.context is not None:  # nothing folded: nothing changed for the model
                self.log.emit(context_compacted(sched.input, out), "engine", event, sched.seq)
        elif sched.activity == SCORE_TASK:
            scored: ScoreOutput = decode_first(attrs.result, ScoreOutput)
            self.log.emit(
                ev.TaskScored(scores=scored.scores, mean=mean_value(scored.scores), skipped=scored.skipped),
                "engine", event, self._transcript.last_message_seq,
            )

    def held_question(self, asked: HeldQuestion, event: HistoryEvent) -> None:
        """A running tool call's server asked a person and its worker holds the request open: the
        question waits for an answer like one the call stopped at."""
        latest = next(
            (s for s in reversed(self._scheduled.values()) if s.activity == INVOKE_TOOL and s.input.call_id == asked.tool_call_id),
            None,
        )
        if latest is not None:
            self._approvals.elicited(asked.tool_call_id, asked.tool_name, {**asked.request, "index": asked.index}, event, latest.seq)

    def failed(self, event: HistoryEvent) -> None:
        """An activity failed for good (its last attempt failed, or it timed out)."""
        timed_out = event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT
        ended = event.activity_task_timed_out_event_attributes if timed_out else event.activity_task_failed_event_attributes
        failure, scheduled_id = ended.failure, ended.scheduled_event_id
        sched = self._scheduled.get(scheduled_id)
        if sched is None:
            return
        attempt = self._attempt.get(scheduled_id, 1)
        if sched.activity == CALL_MODEL:
            self._models.failed(sched.input.provider, failure, attempt, event, sched.seq)
        elif sched.activity == INVOKE_TOOL:
            inp: InvokeToolInput = sched.input
            self.tool_failed(inp.call_id, inp.tool_name, failure, attempt, event, sched.seq)

    def tool_failed(
        self, call_id: str, tool_name: str, failure: Failure, attempt: int, event: HistoryEvent, cause: int,
        *, local: bool = False,
    ) -> None:
        """A tool call failed for good: its earlier attempts, the failure, and what the model is told."""
        message, error_type = failure_text(failure)
        actor = f"tool:{tool_name}"
        for failed in earlier_attempts(failure):
            self._tool_retry(call_id, tool_name, failed, event, cause)
        if own_error_type(failure) == INPUT_REQUIRED:  # not a failure: the server asks a person
            self._approvals.elicited(call_id, tool_name, failure_details(failure).get("request"), event, cause)
            return
        if own_error_type(failure) == LOGIN_REQUIRED:  # not yet a failure: it waits for a new login
            self._approvals.login_needed(call_id, failure_details(failure).get("request"), event, cause)
            return
        if own_error_type(failure) == SAMPLING_REQUIRED:  # not a failure: the server asks the task's model
            self._models.sampling_requested(call_id, tool_name, failure_details(failure).get("request"), event, cause)
            return
        seq = self.log.emit(
            ev.ToolCallFailed(
                call_id=call_id, tool_name=tool_name, error=message, error_type=error_type, attempt=attempt, local=local
            ),
            actor,
            event,
            cause,
        )
        if not tool_failure_ends_task(own_error_type(failure)):  # the model is told
            result = failed_tool_result(tool_name, innermost_message(failure))
            self._rounds.result(tool_result_block(call_id, result), actor, event, seq)

    def _prepared(self, plan: PrepareOutput, event: HistoryEvent) -> None:
        """prepare_task's result: the context plan, then the goal as the first message (a fork's:
        the messages its source had added since the stored transcript it starts from)."""
        task = self.task
        seq = self.log.emit(
            ev.ContextPlanComposed(
                system_prompt_chars=len(task.system_prompt or ""),
                tools=[t.name for t in plan.tools],
                tool_fingerprints={t.name: t.fingerprint for t in plan.tools},
                cached_prefix_chars=plan.plan.system_chars if plan.plan else len(task.system_prompt or ""),
                volatile_chars=plan.plan.volatile_chars if plan.plan else 0,
                channels=[ev.ContextChannel(c.name, c.stable, c.chars) for c in plan.plan.channels]
                if plan.plan
                else [],
            ),
            "engine",
            event,
            1,
        )
        if plan.resources or task.inherited_resources:
            self.log.emit(
                ev.ResourcesEquipped(
                    owned=[r.key for r in plan.resources],
                    exposed=[r.key for r in plan.resources if r.expose],
                    inherited=dict(task.inherited_resources),
                ),
                "engine",
                event,
                seq,
            )
        if task.fork is None:
            self._transcript.append([goal_message(task.goal, task.images)], "human", event, seq)
            return
        for message in task.fork.append:  # a fork starts from its source's record, not its goal
            self._transcript.append([message], "human" if message.origin == "human" else "engine", event, seq)

    def tool_returned(
        self, call_id: str, tool_name: str, out: InvokeToolOutput, event: HistoryEvent, cause: int,
        *, local: bool = False,
    ) -> None:
        """A tool call returned (``local``: as a local activity): its retries, the resources it
        used, its completion and its result in the round."""
        actor = f"tool:{tool_name}"
        for failed in out.retried:
            self._tool_retry(call_id, tool_name, failed, event, cause)
        for used in out.resource_calls:
            self.log.emit(
                ev.ResourceCallObserved(**asdict(used), call_id=call_id, tool_name=tool_name),
                f"resource:{used.resource}",
                event,
                cause,
            )
        seq = self.log.emit(
            ev.ToolCallCompleted(
                call_id=call_id,
                tool_name=tool_name,
                success=out.result.success,
                attempt=out.attempt,
                summary=out.result.summary,
                resource_calls_dropped=out.resource_calls_dropped,
                local=local,
            ),
            actor,
            event,
            cause,
        )
        self._rounds.result(tool_result_block(call_id, out.result), actor, event, seq, out.memories)

    def _validated(self, checked: ValidateOutput, event: HistoryEvent) -> None:
        """validate_output's verdict: a rejected answer is fed back to the model, unless the goal
        gives up (the task then fails with AttemptsExhaustedError)."""
        if checked.ok:
            return
        rejected = self._goals.answer_rejected()
        issue = validation_issue(checked)
        seq = self.log.emit(
            ev.ValidationFailed(attempt=rejected, failure_type=validation_failure_type(checked), issue=issue),
            "engine",
            event,
            self._transcript.last_message_seq,
        )
        if not validation_gives_up(rejected, self.task.max_retries):
            self._transcript.feedback(validation_feedback(issue), event, seq)

    def _guard_verdicts(self, out: CheckGuardsOutput, event: HistoryEvent) -> None:
        by_action: dict[str, list[GuardDecision]] = {}
        for v in out.verdicts:
            by_action.setdefault(v.call_id, []).append(v)
            self.log.emit(
                ev.GuardVerdict(call_id=v.call_id, guard=v.guard, verdict=v.verdict, reason=v.reason),
                f"guard:{v.guard}",
                event,
                self._transcript.cause_of(v.call_id),
            )
        for call_id, verdicts in by_action.items():
            deciding = combine(verdicts)
            if deciding is None:
                continue
            if deciding.verdict == "ask":
                self._approvals.requested(call_id, deciding.guard, deciding.reason, event, self.log.last_seq)
            elif call_id.startswith("finish:"):
                denied = finish_denied_feedback(denied_by_guard(deciding.guard, deciding.reason))
                self._transcript.feedback(denied, event, self.log.last_seq)

    def _tool_retry(self, call_id: str, tool_name: str, failed: AttemptFailure, event: HistoryEvent, cause: int) -> None:
        retried = ev.ToolCallRetried(call_id=call_id, tool_name=tool_name, **retry_fields(failed))
        self.log.emit(retried, f"tool:{tool_name}", event, cause)
