"""The task's own events in history: its start, its memos (refused calls, injected messages, provider fallbacks,
budget warnings, goal results) and its end."""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from noeta.client.agents import agent_of
from noeta.client.projection.goals import Goals
from noeta.client.projection.log import EnvelopeLog
from noeta.client.projection.payloads import decode, decode_first, failure_details, failure_text, scheduled_by
from noeta.client.projection.rounds import ToolRounds
from noeta.client.projection.transcript import Transcript
from noeta.errors import AttemptsExhaustedError, BudgetExceededError
from noeta.protocols import event_log as ev
from noeta.protocols.budget import Spend
from noeta.protocols.messages import Message
from noeta.protocols.names import (
    BUDGET_WARNING_MEMO_KEY,
    INJECTED_MEMO_KEY,
    PROVIDER_FALLBACK_MEMO_KEY,
    REFUSED_MEMO_KEY,
    RESULT_MEMO_KEY,
    STEERED_MEMO_KEY,
)
from noeta.protocols.scope import merge_scopes
from noeta.protocols.task import BudgetWarningRecord, TaskInput, TaskResult, ToolRefusal, refused_result


class Lifecycle:
    """How the task starts and ends, and what the workflow records in its memo along the way."""

    def __init__(self, log: EnvelopeLog, transcript: Transcript, rounds: ToolRounds, goals: Goals) -> None:
        """Records into ``log``; reads causes from ``transcript``, open tool rounds from ``rounds`` and the
        running goal from ``goals``."""
        self._log = log
        self._transcript = transcript
        self._rounds = rounds
        self._goals = goals

    def started(self, event: HistoryEvent) -> TaskInput:
        """A run started: the task's creation (and scope) on its first run. Returns the run's input."""
        task: TaskInput = decode_first(event.workflow_execution_started_event_attributes.input, TaskInput)
        self._log.adopt_trace(task.trace_id)
        if self._log.envelopes:  # a continued run: the earlier run already told the story so far
            return task
        self._goals.first_goal(task.goal_id)
        forked = None
        if task.fork is not None:
            fork = ev.TaskForked(source_task_id=task.fork.source_task_id, turn=task.fork.turn)
            forked = self._log.emit(fork, "human", event, None)
        agent = agent_of(task.metadata)
        created = self._log.emit(
            ev.TaskCreated(
                goal=task.goal,
                model=task.model,
                provider=task.provider,
                tools=list(task.tools),
                max_turns=task.max_turns,
                max_retries=task.max_retries,
                limits=task.limits,
                schedule_id=scheduled_by(event),
                # As the server recorded them: what dispatches the task's work (docs/fairness.md).
                priority=event.workflow_execution_started_event_attributes.priority.priority_key or None,
                fairness_key=event.workflow_execution_started_event_attributes.priority.fairness_key or None,
                agent=agent[0] if agent else None,
                agent_version=agent[1] if agent else None,
            ),
            "human",
            event,
            forked,
        )
        if task.scope:
            scope = ev.ScopeEquipped(levels=list(task.scope), scope=merge_scopes(task.scope))
            self._log.emit(scope, "human", event, created)
        return task

    def memo(self, event: HistoryEvent) -> None:
        """The workflow upserted its memo: each key it wrote is an event."""
        fields = event.workflow_properties_modified_event_attributes.upserted_memo.fields
        if REFUSED_MEMO_KEY in fields:
            self._refused(decode(fields[REFUSED_MEMO_KEY], ToolRefusal), event)
        if STEERED_MEMO_KEY in fields:
            self._goals.steered(decode(fields[STEERED_MEMO_KEY], list[Message]), event)
        if INJECTED_MEMO_KEY in fields:
            injected: list[Message] = decode(fields[INJECTED_MEMO_KEY], list[Message])
            for message in injected:
                self._transcript.append([message], "host", event, None)
        if BUDGET_WARNING_MEMO_KEY in fields:
            warnings: list[BudgetWarningRecord] = decode(fields[BUDGET_WARNING_MEMO_KEY], list[BudgetWarningRecord])
            for warning in warnings:
                self._log.emit(warning, "engine", event, self._transcript.last_message_seq)
        if PROVIDER_FALLBACK_MEMO_KEY in fields:
            switch: ev.ProviderFallback = decode(fields[PROVIDER_FALLBACK_MEMO_KEY], ev.ProviderFallback)
            self._log.emit(
                switch,
                "engine",
                event,
                self._transcript.last_message_seq,
            )
        if RESULT_MEMO_KEY in fields:
            result: TaskResult = decode(fields[RESULT_MEMO_KEY], TaskResult)
            if result.status == "interrupted":  # the calls it was running: "interrupted" results first
                self._rounds.interrupted(event, self._transcript.last_message_seq)
            ended: ev.TaskCompleted | ev.GoalInterrupted = (
                ev.GoalInterrupted(answer=result.answer, usage=result.usage, turns=result.turns)
                if result.status == "interrupted"
                else ev.TaskCompleted(
                    answer=result.answer, status=result.status, usage=result.usage, turns=result.turns, data=result.data
                )
            )
            self._log.emit(ended, "engine", event, self._transcript.last_message_seq)
            self._goals.ended(event)

    def _refused(self, refusal: ToolRefusal, event: HistoryEvent) -> None:
        """A call the workflow refused without running it (PATCH_REFUSALS_RECORDED)."""
        self._rounds.join(refusal.call_id, event.workflow_properties_modified_event_attributes.workflow_task_completed_event_id)
        seq = self._log.emit(refusal, "engine", event, self._transcript.cause_of(refusal.call_id))
        self._rounds.result(refused_result(refusal), "engine", event, seq)

    def closed(self, event: HistoryEvent) -> None:
        """The run ended: failed, timed out, terminated, cancelled or continued as new (a run that
        completed told its result through the memo already)."""
        t = event.event_type
        if t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            failure = event.workflow_execution_failed_event_attributes.failure
            message, error_type = failure_text(failure)
            if error_type == AttemptsExhaustedError.__name__:
                self._attempts_exhausted(failure_details(failure), event)
            elif error_type == BudgetExceededError.__name__:
                self._budget_exceeded(failure_details(failure), event)
            failed = ev.TaskFailed(reason=message, error_type=error_type)
            self._log.emit(failed, "engine", event, self._transcript.last_message_seq)
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
            failed = ev.TaskFailed(reason="workflow timed out", error_type=ev.WORKFLOW_TIMED_OUT)
            self._log.emit(failed, "engine", event, None)
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
            reason = event.workflow_execution_terminated_event_attributes.reason or "terminated"
            failed = ev.TaskFailed(reason=f"terminated: {reason}", error_type=ev.WORKFLOW_TERMINATED)
            self._log.emit(failed, "engine", event, None)
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
            self._log.emit(ev.TaskCancelled(), "human", event, None)
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            attrs = event.workflow_execution_continued_as_new_event_attributes
            self._log.emit(ev.TaskContinuedAsNew(new_run_id=attrs.new_execution_run_id or None), "engine", event, None)

    def _attempts_exhausted(self, details: dict[str, Any], event: HistoryEvent) -> None:
        self._log.emit(
            ev.AttemptsExhausted(
                attempts=int(details.get("attempts", 0)),
                issues=list(details.get("issues", [])),
                last_failure_type=str(details.get("last_failure_type", "")),
            ),
            "engine",
            event,
            self._transcript.last_message_seq,
        )

    def _budget_exceeded(self, details: dict[str, Any], event: HistoryEvent) -> None:
        spend = Spend.from_details(details.get("spend")) or Spend()
        self._log.emit(
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
            self._transcript.last_message_seq,
        )
