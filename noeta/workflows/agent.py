"""AgentWorkflow: the Policy/decide loop as a deterministic Temporal workflow.

Imports only pure modules (protocols, errors, the default policy); every provider call and tool
invocation is an activity scheduled by name. The in-memory transcript is rebuilt on replay from
activity results, while history carries only references and deltas (see noeta.context.transcript).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import datetime, timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    RetryState,
)

from noeta.builtins.llm_policy import LLMPolicy
from noeta.errors import AttemptsExhaustedError
from noeta.protocols.decisions import CallModel, CallTools, Finish, SpawnSubtask
from noeta.protocols.hooks import (
    GuardDecision,
    ProposedAction,
    ProposedFinish,
    ProposedSpawnSubtask,
    ProposedToolCall,
    combine,
)
from noeta.protocols.messages import (
    ContentRef,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from noeta.protocols.policy import Policy
from noeta.protocols.step_context import StepContext
from noeta.protocols.task import (
    APPROVAL_TIMER_PREFIX,
    CALL_MODEL,
    CHECK_GUARDS,
    DEFAULT_HEARTBEAT_SECONDS,
    INDEX_INTERVAL_SECONDS,
    INJECTED_MEMO_KEY,
    INVOKE_TOOL,
    LOAD_TRANSCRIPT,
    MAX_GOAL_BYTES,
    MAX_INJECTED_CHARS_PER_STEP,
    MAX_QUEUED_INJECTION_BYTES,
    PATCH_LEAN_STEPS,
    PREPARE_TASK,
    RESULT_MEMO_KEY,
    TASK_FATAL_TOOL_ERRORS,
    VALIDATE_OUTPUT,
    WORKFLOW_NAME,
    ApprovalInput,
    ApprovalRequest,
    CallModelInput,
    CallModelOutput,
    Carry,
    CheckGuardsInput,
    CheckGuardsOutput,
    GoalInput,
    InjectInput,
    InvokeToolInput,
    InvokeToolOutput,
    LoadTranscriptInput,
    LoadTranscriptOutput,
    PolicyRef,
    PrepareInput,
    PrepareOutput,
    TaskInput,
    TaskResult,
    ValidateInput,
    ValidateOutput,
    approval_timed_out,
    denied_by_guard,
    finish_denied_feedback,
    not_approved,
    tool_failed_text,
    validation_feedback,
)
from noeta.protocols.tool import ToolResult, ToolSpec
from noeta.protocols.view import View

STATUS = SearchAttributeKey.for_keyword("NoetaStatus")
TURNS = SearchAttributeKey.for_int("NoetaTurns")
TOKENS_IN = SearchAttributeKey.for_int("NoetaTokensIn")
TOKENS_OUT = SearchAttributeKey.for_int("NoetaTokensOut")


def retry_policy(max_retries: int, non_retryable: tuple[str, ...] = ()) -> RetryPolicy:
    """``max_retries`` retries after the first attempt, exponential backoff from 1 s."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=max_retries + 1,
        non_retryable_error_types=list(non_retryable),
    )


def load_policy(ref: PolicyRef | None) -> Policy:
    if ref is None:
        return LLMPolicy()
    module_name, _, qualname = ref.path.partition(":")
    try:
        # __import__ goes through the sandbox importer; importlib would bypass its checks.
        target: Any = __import__(module_name, fromlist=["__name__"])
        for part in qualname.split("."):
            target = getattr(target, part)
        return target(**ref.params)
    except Exception as err:  # any failure here is a configuration error of the task
        raise ApplicationError(
            f"cannot load policy {ref.path!r} inside the workflow: {err}. A policy must be a "
            "module-level class importable by the worker, built from its dataclass fields.",
            type="PolicyLoadError",
            non_retryable=True,
        ) from err


def short_arguments(arguments: dict[str, Any], limit: int = 80) -> str:
    text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def typed_task_error(cause: ApplicationError) -> ApplicationError:
    """Fail the task with an activity's typed error, keeping its type and details for the client."""
    details = cause.details[0] if cause.details else {"message": cause.message}
    return ApplicationError(cause.message, details, type=cause.type, non_retryable=True)


def raise_if_cancelled(err: ActivityError | ChildWorkflowError) -> None:
    """A step cancelled because the task is being cancelled: cancel the task, do not fail it."""
    if isinstance(err.cause, CancelledError):
        raise asyncio.CancelledError(str(err.cause)) from err


def failure_message(err: BaseException) -> str:
    """The innermost message of an activity/child failure chain."""
    while getattr(err, "cause", None) is not None:
        err = err.cause  # type: ignore[assignment]
    return getattr(err, "message", None) or str(err) or type(err).__name__


@workflow.defn(name=WORKFLOW_NAME)
class AgentWorkflow:
    @workflow.init
    def __init__(self, task: TaskInput) -> None:
        # Set before any handler runs: a send_goal may arrive in the very first workflow task.
        self._task = task
        self._transcript: list[Message] = []
        self._pending: list[Message] = []  # added since the transcript head was stored
        self._head: ContentRef | None = None
        self._system_ref: ContentRef | None = None
        self._output_schema_ref: ContentRef | None = None
        self._volatile_ref: ContentRef | None = None
        self._validation_issues: list[str] = []
        self._tools: dict[str, ToolSpec] = {}
        self._usage = Usage()
        self._turn = 0
        self._total_turns = 0
        # Handlers may run before run() does: state they touch comes from the carry right away.
        carry = task.carry
        self._goal_queue: list[tuple[int, GoalInput]] = list(carry.goal_queue) if carry else []
        self._goal_ids: dict[str, int] = dict(carry.goal_ids) if carry else {}
        self._goals_received = carry.goals_received if carry else 1
        self._results: dict[int, TaskResult] = dict(carry.recent_results) if carry else {}
        self._closed = task.carry.closed if task.carry else False
        self._pending_approvals: dict[str, ApprovalRequest] = {}
        self._approvals: dict[str, ApprovalInput] = {}
        self._finish_attempts = 0
        self._finish_refusals = 0  # in the current goal (and run)
        self._last_refusal = ""
        self._ctx: StepContext | None = None
        self._injections: list[InjectInput] = list(task.carry.injections) if task.carry else []
        self._indexed_at: datetime | None = None  # when search attributes were last upserted

    # -- handlers -------------------------------------------------------------------------------

    # A task that fails mid-goal fails its waiting send_goal callers too: nothing is lost by abandoning.
    @workflow.update(name="send_goal", unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def send_goal(self, goal: GoalInput) -> TaskResult:
        """The next goal of a multi-turn task; returns that goal's result. A goal_id seen before
        (the client retrying after the task continued as new) is not queued again."""
        index = self._goal_ids.get(goal.goal_id) if goal.goal_id else None
        if index is None:
            index = self._goals_received
            self._goals_received += 1
            self._goal_queue.append((index, goal))
            if goal.goal_id:
                self._goal_ids[goal.goal_id] = index
        await workflow.wait_condition(lambda: index in self._results)
        return self._results[index]

    @send_goal.validator
    def _validate_goal(self, goal: GoalInput) -> None:
        if goal.goal_id and goal.goal_id in self._goal_ids:
            return  # a caller following its goal into this run
        if not self._task.keep_open:
            raise ApplicationError("task was not started with keep_open=True", type="TaskNotOpenError")
        if self._closed:
            raise ApplicationError("task is closed", type="TaskNotOpenError")
        if not goal.goal.strip():
            raise ApplicationError("goal is empty", type="ConfigurationError")
        if len(goal.goal.encode()) > MAX_GOAL_BYTES:  # refused here, it never enters history
            raise ApplicationError(f"goal is over {MAX_GOAL_BYTES} bytes", type="PayloadTooLargeError")

    @workflow.update(name="approve")
    def approve(self, decision: ApprovalInput) -> None:
        """A human's answer to an action that a guard sent for approval."""
        self._approvals[decision.call_id] = decision

    @approve.validator
    def _validate_approval(self, decision: ApprovalInput) -> None:
        if decision.call_id not in self._pending_approvals or decision.call_id in self._approvals:
            waiting = ", ".join(sorted(self._pending_approvals)) or "none"
            raise ApplicationError(
                f"no action {decision.call_id!r} is waiting for approval (waiting: {waiting})",
                type="ApprovalNotPendingError",
            )

    @workflow.query(name="pending_approvals")
    def pending_approvals(self) -> list[ApprovalRequest]:
        return list(self._pending_approvals.values())

    @workflow.signal(name="inject")
    def inject(self, message: InjectInput) -> None:
        """Host context (origin "system" or "memory") for the model's next step. A signal cannot be
        refused: past MAX_QUEUED_INJECTION_BYTES waiting, its text is replaced by a short note."""
        queued = sum(len(i.text.encode()) for i in self._injections)
        if queued + len(message.text.encode()) > MAX_QUEUED_INJECTION_BYTES:
            message = InjectInput(
                f"[{len(message.text)} characters of injected context dropped: too much was waiting]",
                message.origin,
            )
        self._injections.append(message)

    @workflow.signal(name="close")
    def close(self) -> None:
        """End a keep-open task once queued goals are done."""
        self._closed = True

    @workflow.query(name="progress")
    def progress(self) -> dict[str, Any]:
        return {
            "turns": self._total_turns,
            "messages": len(self._transcript),
            "usage": self._usage,
            "goals_done": len(self._results),
        }

    # -- the loop -------------------------------------------------------------------------------

    def _index(self, status: str | None = None) -> None:
        """Refresh the task's search attributes (status, turns, tokens) for the UI and CLI.

        Each upsert is a history event: counters alone are refreshed at most every
        INDEX_INTERVAL_SECONDS, and with every status change (including the final one)."""
        if not self._task.index:
            return
        now = workflow.now()
        if status is None and workflow.patched(PATCH_LEAN_STEPS):
            # The client set the initial values when it started the task.
            since = now - (self._indexed_at or workflow.info().start_time)
            if since.total_seconds() < INDEX_INTERVAL_SECONDS:
                return
        self._indexed_at = now
        updates = [
            TURNS.value_set(self._total_turns),
            TOKENS_IN.value_set(self._usage.input),
            TOKENS_OUT.value_set(self._usage.output),
        ]
        if status is not None:
            updates.append(STATUS.value_set(status))
        workflow.upsert_search_attributes(updates)

    @workflow.run
    async def run(self, task: TaskInput) -> TaskResult:
        try:
            return await self._run(task)
        except asyncio.CancelledError:
            self._index("cancelled")
            raise
        except (ActivityError, ChildWorkflowError) as err:
            if isinstance(err.cause, CancelledError):
                self._index("cancelled")
                raise asyncio.CancelledError(str(err.cause)) from err
            self._index("failed")
            raise
        except ApplicationError:
            self._index("failed")
            raise

    async def _run(self, task: TaskInput) -> TaskResult:
        info = workflow.info()
        policy = load_policy(task.policy)
        carry = task.carry
        if carry is None:
            plan = await self._prepare(task)
            tools, trace_id = plan.tools, task.trace_id or info.workflow_id
            self._system_ref, self._output_schema_ref = plan.system_ref, plan.output_schema_ref
            self._volatile_ref = plan.volatile_ref
        else:
            tools, trace_id = carry.tools, carry.trace_id
            await self._restore(carry)
        self._tools = {spec.name: spec for spec in tools}
        ctx = StepContext(
            task_id=info.workflow_id,
            trace_id=trace_id,
            model=task.model,
            tools=tools,
            max_turns=task.max_turns,
            system_prompt=task.system_prompt,
            metadata=task.metadata,
        )
        self._ctx = ctx
        index = carry.goal_index if carry else 0
        goal: GoalInput | None = None if carry else GoalInput(goal=task.goal, images=task.images)
        resuming_idle = carry is not None and not carry.in_goal  # its result came in the carry
        while True:
            if not resuming_idle:
                self._results[index] = await self._run_goal(policy, ctx, goal, index)
            resuming_idle = False
            if not task.keep_open:
                self._index(self._results[index].status)
                return self._results[index]
            if not self._goal_queue:
                self._index("idle")
            await workflow.wait_condition(
                lambda: bool(self._goal_queue) or self._closed or self._should_continue_as_new()
            )
            if not self._goal_queue and not self._closed:
                self._continue_as_new(index, in_goal=False)
            if not self._goal_queue:
                await workflow.wait_condition(workflow.all_handlers_finished)
                self._index(self._results[index].status)
                return self._results[index]
            index, goal = self._goal_queue.pop(0)
            self._index("running")

    async def _prepare(self, task: TaskInput) -> PrepareOutput:
        inp = PrepareInput(
            task_id=workflow.info().workflow_id,
            tools=task.tools,
            expected_fingerprints=task.tool_fingerprints,
            system_prompt=task.system_prompt,
            output_schema=task.output_schema,
            validators=task.validators,
            guards=task.guards,
            channels=task.channels,
        )
        timeout, retries = timedelta(seconds=60), retry_policy(task.max_retries, TASK_FATAL_TOOL_ERRORS)
        summary = f"prepare: {len(task.tools)} tool(s)"
        try:
            # A short check of the worker's registry and a few content-store writes: as a local
            # activity it saves a round trip through the server and five history events per task.
            if workflow.patched(PATCH_LEAN_STEPS):
                return await workflow.execute_local_activity(
                    PREPARE_TASK, inp, result_type=PrepareOutput, start_to_close_timeout=timeout,
                    retry_policy=retries, summary=summary,
                )
            return await workflow.execute_activity(
                PREPARE_TASK, inp, result_type=PrepareOutput, start_to_close_timeout=timeout,
                retry_policy=retries, summary=summary,
            )
        except ActivityError as err:
            if isinstance(err.cause, ApplicationError):
                raise typed_task_error(err.cause) from err
            raise

    # -- continue-as-new ----------------------------------------------------------------------

    def _should_continue_as_new(self) -> bool:
        """At a safe point only: no update waiting on this run, no approval pending."""
        info = workflow.info()
        limit = self._task.max_history_events
        suggested = info.is_continue_as_new_suggested() or (
            limit is not None and info.get_current_history_length() >= limit
        )
        # send_goal callers still waiting are abandoned here and re-send their goal_id to the next
        # run (AsyncClient.send_goal does), so they do not hold the task in an ever-growing run.
        return suggested and not self._pending_approvals

    def _continue_as_new(self, index: int, in_goal: bool) -> NoReturn:
        assert self._ctx is not None
        carry = Carry(
            head=self._head,
            pending=list(self._pending),
            tools=list(self._tools.values()),
            system_ref=self._system_ref,
            output_schema_ref=self._output_schema_ref,
            trace_id=self._ctx.trace_id,
            volatile_ref=self._volatile_ref,
            usage=self._usage,
            total_turns=self._total_turns,
            turn=self._turn,
            goal_index=index,
            goals_received=self._goals_received,
            in_goal=in_goal,
            validation_issues=list(self._validation_issues),
            finish_attempts=self._finish_attempts,
            injections=list(self._injections),
            closed=self._closed,
            goal_queue=list(self._goal_queue),
            # Enough to answer callers that follow their goal into the next run; bounded.
            goal_ids={g: i for g, i in self._goal_ids.items() if i >= index - 20},
            recent_results={i: r for i, r in self._results.items() if i >= index - 20},
            runs=(self._task.carry.runs + 1) if self._task.carry else 1,
        )
        # Channels are already composed into the carried refs; dropping them keeps the input small.
        workflow.continue_as_new(dataclasses.replace(self._task, carry=carry, channels=[]))

    async def _restore(self, carry: Carry) -> None:
        loaded = await workflow.execute_activity(
            LOAD_TRANSCRIPT,
            LoadTranscriptInput(head=carry.head),
            result_type=LoadTranscriptOutput,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=retry_policy(self._task.max_retries),
            summary=f"resume run {carry.runs + 1}",
        )
        self._transcript = [*loaded.messages, *carry.pending]
        self._pending = list(carry.pending)
        self._head = carry.head
        self._system_ref, self._output_schema_ref = carry.system_ref, carry.output_schema_ref
        self._volatile_ref = carry.volatile_ref
        self._usage, self._total_turns, self._turn = carry.usage, carry.total_turns, carry.turn
        self._validation_issues = list(carry.validation_issues)
        self._finish_attempts = carry.finish_attempts

    def _append(self, message: Message) -> None:
        self._transcript.append(message)
        self._pending.append(message)

    def _take_injections(self) -> None:
        """Injected messages enter the transcript between steps, never inside a tool round, at most
        MAX_INJECTED_CHARS_PER_STEP per step (a signal cannot be refused, so the workflow bounds it)."""
        if not self._injections:
            return
        messages, budget = [], MAX_INJECTED_CHARS_PER_STEP
        while self._injections and (not messages or len(self._injections[0].text) <= budget):
            injection = self._injections.pop(0)
            text = injection.text
            if len(text) > budget:
                text = text[:budget] + " [truncated]"
            budget -= len(text)
            messages.append(Message(role="user", content=[TextBlock(text=text)], origin=injection.origin))
        for message in messages:
            self._append(message)
        workflow.upsert_memo({INJECTED_MEMO_KEY: messages})  # records the step they entered at

    async def _run_goal(
        self, policy: Policy, ctx: StepContext, goal: GoalInput | None, index: int
    ) -> TaskResult:
        """Run goal ``index`` to its result; ``goal`` None resumes it after continue-as-new."""
        if goal is not None:
            self._append(
                Message(role="user", content=[TextBlock(text=goal.goal), *goal.images], origin="human")
            )
            self._turn = 0
            self._validation_issues = []
            self._finish_refusals = 0
        while True:
            if self._should_continue_as_new():
                self._continue_as_new(index, in_goal=True)
            self._take_injections()
            view = View(
                transcript=tuple(self._transcript),
                usage=self._usage,
                turn=self._turn,
                budget=max(0, ctx.max_turns - self._turn),
                pending_approvals=tuple(self._pending_approvals),
            )
            try:
                decision = policy.decide(ctx, view)
            except Exception as err:  # a bug in a policy must fail the task, not wedge it
                raise ApplicationError(
                    f"policy {type(policy).__name__}.decide raised {type(err).__name__}: {err}",
                    type="PolicyError",
                    non_retryable=True,
                ) from err
            if isinstance(decision, Finish):
                if decision.status != "failed" and not await self._finish_allowed(decision, index):
                    if self._finish_refusals >= ctx.max_turns:  # a policy that keeps trying to finish
                        return self._result(
                            f"finishing was refused {self._finish_refusals} times; the last refusal: "
                            f"{self._last_refusal}",
                            "failed",
                            index,
                        )
                    continue
                if decision.status == "failed" or not (self._task.output_schema or self._task.validators):
                    return self._result(decision.answer, decision.status, index)
                checked = await self._validate(decision.answer)
                if checked.ok:
                    return self._result(decision.answer, "completed", index, checked.data)
                continue
            if isinstance(decision, CallModel):
                if self._turn >= ctx.max_turns:
                    return self._result(
                        f"max_turns ({ctx.max_turns}) reached before the task finished", "failed", index
                    )
                await self._call_model(decision)
            elif isinstance(decision, CallTools):
                verdicts = await self._check_guards(
                    [
                        ProposedToolCall(c.call_id, c.tool_name, c.arguments, self._risk(c.tool_name))
                        for c in decision.calls
                    ]
                )
                results = await asyncio.gather(
                    *(self._guarded_tool(c, verdicts.get(c.call_id)) for c in decision.calls)
                )
                self._append(Message(role="tool", content=list(results)))
            elif isinstance(decision, SpawnSubtask):
                verdict = (await self._check_guards([ProposedSpawnSubtask(decision.call_id, decision.goal)])).get(
                    decision.call_id
                )
                refusal = await self._refusal(ProposedSpawnSubtask(decision.call_id, decision.goal), verdict)
                if refusal is None:
                    block = await self._spawn(ctx, decision)
                else:  # recorded like a rejected tool call named "subtask"
                    block = await self._invoke_tool(
                        ToolUseBlock(call_id=decision.call_id, tool_name="subtask", arguments={"goal": decision.goal}),
                        reject=refusal,
                    )
                self._append(Message(role="tool", content=[block]))
            else:
                raise ApplicationError(
                    f"policy returned {type(decision).__name__}, which is not a Decision",
                    type="PolicyLoadError",
                    non_retryable=True,
                )

    def _result(self, answer: str, status: str, index: int, data: Any = None) -> TaskResult:
        result = TaskResult(
            answer=answer,
            status="failed" if status == "failed" else "completed",
            usage=self._usage,
            turns=self._turn,
            goal_index=index,
            data=data,
        )
        # Recorded in history (and shown in the UI's memo) so every goal's outcome is projectable.
        workflow.upsert_memo({RESULT_MEMO_KEY: result})
        return result

    # -- guards and approvals -------------------------------------------------------------------

    def _risk(self, tool_name: str) -> str:
        spec = self._tools.get(tool_name)
        return spec.risk_level if spec else "high"

    async def _check_guards(self, actions: list[ProposedAction]) -> dict[str, GuardDecision]:
        """The deciding verdict per action id (absent: allowed). Recorded, so replay never re-asks."""
        task = self._task
        if not task.guards or not actions:
            return {}
        out = await workflow.execute_activity(
            CHECK_GUARDS,
            CheckGuardsInput(
                task_id=workflow.info().workflow_id,
                trace_id=self._ctx.trace_id if self._ctx else workflow.info().workflow_id,
                turn=self._total_turns,
                guards=task.guards,
                actions=actions,
            ),
            result_type=CheckGuardsOutput,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=retry_policy(task.max_retries),
            summary=f"guards on {', '.join(a.call_id for a in actions)}",
        )
        deciding = {}
        for action in actions:
            verdict = combine([v for v in out.verdicts if v.call_id == action.call_id])
            if verdict is not None:
                deciding[action.call_id] = verdict
        return deciding

    async def _refusal(self, action: ProposedAction, verdict: GuardDecision | None) -> str | None:
        """None when the action may go ahead; else why not (a denial, or a human's refusal)."""
        if verdict is None:
            return None
        if verdict.verdict == "deny":
            return denied_by_guard(verdict.guard, verdict.reason)
        decision = await self._await_approval(ApprovalRequest(action.call_id, action, verdict.reason, verdict.guard))
        return None if decision.approved else not_approved(decision)

    async def _await_approval(self, request: ApprovalRequest) -> ApprovalInput:
        """Wait durably for ``approve``; no answer within the timeout is a refusal."""
        timeout = self._task.approval_timeout_seconds
        self._pending_approvals[request.call_id] = request
        self._index("awaiting_approval")
        # No try/finally here: code in a finally also runs when the worker evicts the workflow from
        # its cache, and workflow calls are not allowed then.
        try:
            await workflow.wait_condition(
                lambda: request.call_id in self._approvals,
                timeout=timedelta(seconds=timeout),
                timeout_summary=f"{APPROVAL_TIMER_PREFIX}{request.call_id}",
            )
            decision = self._approvals[request.call_id]
        except asyncio.TimeoutError:
            decision = approval_timed_out(request.call_id, timeout)
        del self._pending_approvals[request.call_id]
        if not self._pending_approvals:
            self._index("running")
        return decision

    async def _guarded_tool(self, call: ToolUseBlock, verdict: GuardDecision | None) -> ToolResultBlock:
        refusal = await self._refusal(
            ProposedToolCall(call.call_id, call.tool_name, call.arguments, self._risk(call.tool_name)), verdict
        )
        return await self._invoke_tool(call, reject=refusal)

    async def _finish_allowed(self, decision: Finish, index: int) -> bool:
        if not self._task.guards:
            return True
        self._finish_attempts += 1
        action = ProposedFinish(decision.answer, decision.status, call_id=f"finish:{index}:{self._finish_attempts}")
        refusal = await self._refusal(action, (await self._check_guards([action])).get(action.call_id))
        if refusal is None:
            return True
        self._finish_refusals += 1
        self._last_refusal = refusal
        self._append(Message(role="user", content=[TextBlock(text=finish_denied_feedback(refusal))], origin="system"))
        return False

    async def _validate(self, answer: str) -> ValidateOutput:
        """Check the final answer; on failure tell the model why, or give up after max_retries."""
        task = self._task
        checked = await workflow.execute_activity(
            VALIDATE_OUTPUT,
            ValidateInput(
                task_id=workflow.info().workflow_id,
                answer=answer,
                output_schema=task.output_schema,
                validators=task.validators,
            ),
            result_type=ValidateOutput,
            start_to_close_timeout=timedelta(seconds=task.tool_timeout_seconds),
            retry_policy=retry_policy(task.max_retries),
            summary=f"validate answer ({len(task.validators)} validator(s))",
        )
        if checked.ok:
            return checked
        issue = checked.issue or "Validation failed"
        self._validation_issues.append(issue)
        if len(self._validation_issues) > task.max_retries:
            exhausted = AttemptsExhaustedError(
                attempts=len(self._validation_issues),
                issues=list(self._validation_issues),
                last_failure_type=checked.failure_type or "validator",
                last_data=checked.data,
                last_raw_text=answer,
            )
            raise ApplicationError(
                str(exhausted), exhausted.to_details(), type="AttemptsExhaustedError", non_retryable=True
            )
        # The feedback is the engine's, not the user's: origin "system" (an InjectedMessage).
        self._append(
            Message(
                role="user",
                content=[TextBlock(text=validation_feedback(issue))],
                origin="system",
            )
        )
        return checked

    async def _call_model(self, decision: CallModel) -> None:
        task = self._task
        self._turn += 1
        self._total_turns += 1
        request = CallModelInput(
            task_id=workflow.info().workflow_id,
            provider=task.provider,
            model=task.model,
            head=self._head,
            append=list(self._pending),
            system_ref=self._system_ref,
            tools=decision.tools if decision.tools is not None else list(self._tools),
            turn=self._total_turns,
            temperature=decision.temperature if decision.temperature is not None else task.temperature,
            max_tokens=decision.max_tokens or task.max_tokens,
            output_schema_ref=self._output_schema_ref,
            volatile_ref=self._volatile_ref,
        )
        try:
            out = await workflow.execute_activity(
                CALL_MODEL,
                request,
                result_type=CallModelOutput,
                start_to_close_timeout=timedelta(seconds=task.model_timeout_seconds),
                heartbeat_timeout=timedelta(seconds=DEFAULT_HEARTBEAT_SECONDS),
                # Provider activities mark their own errors non-retryable (see noeta.providers.errors).
                retry_policy=retry_policy(task.max_retries),
                summary=f"{task.provider} {task.model or ''} · turn {self._total_turns}".replace("  ", " "),
            )
        except ActivityError as err:
            raise_if_cancelled(err)
            raise self._provider_failure(err, task.max_retries) from err
        self._head = out.head
        self._pending.clear()
        self._transcript.append(Message(role="assistant", content=out.response.content))
        self._usage = self._usage + out.response.usage
        self._index()

    @staticmethod
    def _provider_failure(err: ActivityError, max_retries: int) -> ApplicationError:
        cause = err.cause
        if isinstance(cause, ApplicationError) and (
            cause.non_retryable or err.retry_state == RetryState.NON_RETRYABLE_FAILURE
        ):
            return typed_task_error(cause)
        details = cause.details[0] if isinstance(cause, ApplicationError) and cause.details else {}
        failures = details.get("attempt_failures") if isinstance(details, dict) else None
        issues = [f["error"] for f in failures] if failures else [failure_message(err)]
        exhausted = AttemptsExhaustedError(
            attempts=max_retries + 1,
            issues=issues,
            last_failure_type="provider",
        )
        return ApplicationError(
            str(exhausted), exhausted.to_details(), type="AttemptsExhaustedError", non_retryable=True
        )

    async def _invoke_tool(self, call: ToolUseBlock, reject: str | None = None) -> ToolResultBlock:
        """Run one tool call; with ``reject`` (or an unknown tool) the call is recorded as refused."""
        task = self._task
        spec = None if reject else self._tools.get(call.tool_name)
        if spec is None and reject is None:
            available = ", ".join(sorted(self._tools)) or "none"
            reject = f"Unknown tool {call.tool_name!r}. Available tools: {available}."
        retries = spec.max_retries if spec and spec.max_retries is not None else task.max_retries
        timeout = spec.start_to_close_seconds if spec and spec.start_to_close_seconds else task.tool_timeout_seconds
        heartbeat = spec.heartbeat_seconds if spec and spec.heartbeat_seconds else DEFAULT_HEARTBEAT_SECONDS
        try:
            out = await workflow.execute_activity(
                INVOKE_TOOL,
                InvokeToolInput(
                    task_id=workflow.info().workflow_id,
                    call_id=call.call_id,
                    tool_name=call.tool_name,
                    arguments=call.arguments,
                    expected_fingerprint=spec.fingerprint if spec else None,
                    reject_reason=reject,
                    workspace_dir=task.workspace_dir,
                ),
                result_type=InvokeToolOutput,
                start_to_close_timeout=timedelta(seconds=timeout),
                heartbeat_timeout=timedelta(seconds=heartbeat),
                retry_policy=retry_policy(retries, TASK_FATAL_TOOL_ERRORS),
                summary=f"{call.tool_name}({short_arguments(call.arguments)})",
            )
            result = out.result
        except ActivityError as err:
            raise_if_cancelled(err)
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type in TASK_FATAL_TOOL_ERRORS:
                raise typed_task_error(cause) from err
            result = ToolResult(
                success=False,
                output=tool_failed_text(call.tool_name, failure_message(err)),
            )
        output = result.output_ref or result.output
        return ToolResultBlock(
            call_id=call.call_id,
            output=output,
            success=result.success,
            error=None if result.success else (result.output or "tool failed"),
            images=list(result.images) or None,
        )

    async def _spawn(self, ctx: StepContext, spawn: SpawnSubtask) -> ToolResultBlock:
        task = self._task
        # The child inherits the task's provider, limits, guards and channels; it answers in text
        # (no output schema or validators), with the default policy, and shares the trace.
        child = dataclasses.replace(
            task,
            goal=spawn.goal,
            images=[],
            system_prompt=spawn.system_prompt or task.system_prompt,
            tools=spawn.tools if spawn.tools is not None else task.tools,
            policy=None,
            keep_open=False,
            trace_id=ctx.trace_id,
            output_schema=None,
            validators=[],
            metadata={**task.metadata, "scope": spawn.scope, "parent": ctx.task_id},
            carry=None,
        )
        try:
            result = await workflow.execute_child_workflow(
                WORKFLOW_NAME,
                child,
                id=f"{ctx.task_id}/sub/{spawn.call_id}",
                result_type=TaskResult,
                static_summary=spawn.goal[:200],
            )
        except ChildWorkflowError as err:
            raise_if_cancelled(err)  # the parent is being cancelled: so is the task, not just the child
            return ToolResultBlock(
                call_id=spawn.call_id, output=None, success=False, error=failure_message(err)
            )
        self._usage = self._usage + result.usage
        return ToolResultBlock(
            call_id=spawn.call_id,
            output=result.answer,
            success=result.status == "completed",
            error=None if result.status == "completed" else result.answer,
        )
