"""Checks that run user code on the worker: ``check_guards`` before tool calls, subtasks and
finishing, ``validate_output`` on a final answer.

:class:`Checks` serves both from the worker's shared services (the registry's guards, validators and
output models, the user-code threads, the task's resources).
"""

from __future__ import annotations

from typing import Any

from pydantic_core import to_jsonable_python
from temporalio import activity

from noeta.activities._heartbeat import with_heartbeat
from noeta.activities._schema import ParseFailure, check_schema, parse_json_answer
from noeta.activities._services import WorkerServices
from noeta.activities.webhook import WebhookSettings, approval_requested
from noeta.protocols.activity_io import CheckGuardsInput, CheckGuardsOutput, ValidateInput, ValidateOutput
from noeta.protocols.hooks import GuardContext, GuardDecision, VerdictResult, combine
from noeta.protocols.names import CHECK_GUARDS, VALIDATE_OUTPUT
from noeta.protocols.validation import DEFAULT_FAILURE_MESSAGE
from noeta.resources.context import activated
from noeta.telemetry import instrument


class Checks:
    """``check_guards`` and ``validate_output``: the user's guards and validators, run on this worker."""

    def __init__(self, services: WorkerServices) -> None:
        """``services``: the worker's shared services, whose registry has the guards and validators."""
        self.services = services
        self.registry = services.registry
        self.webhook = WebhookSettings.from_env().webhook()
        """Notified when an action starts waiting for a human (NOETA_APPROVAL_WEBHOOK_URL)."""

    # -- check_guards -------------------------------------------------------------------------

    @activity.defn(name=CHECK_GUARDS)
    async def check_guards(self, inp: CheckGuardsInput) -> CheckGuardsOutput:
        """Every guard's verdict on every action, in the task's guard order."""
        run = await self.services.active_run(inp.task_id, inp.env)
        ctx = GuardContext(
            task_id=inp.task_id,
            trace_id=inp.trace_id,
            turn=inp.turn,
            metadata=dict(inp.metadata),
            resources=run.resources,
            scope=run.scope,
        )
        verdicts = []
        for action in inp.actions:
            for name in inp.guards:
                guard = self.registry.guards[name]
                with activated(run):
                    result = await with_heartbeat(
                        self.services.user_code(guard.check, action, ctx, label=f"guard {name!r}")
                    )
                if not isinstance(result, VerdictResult):
                    raise TypeError(f"guard {name!r} returned {type(result).__name__}, not VerdictResult")
                verdicts.append(GuardDecision(action.call_id, name, result.verdict, result.reason))
        decided = [combine([v for v in verdicts if v.call_id == a.call_id]) for a in inp.actions]
        asked = [(a, d) for a, d in zip(inp.actions, decided, strict=True) if d is not None and d.verdict == "ask"]
        if not inp.second_look:  # an edited call's second look waits for nobody
            instrument.approvals_requested(len(asked))
            if self.webhook is not None:
                for action, decision in asked:
                    self.webhook.notify(approval_requested(inp.task_id, action, decision), activity.client())
        return CheckGuardsOutput(verdicts=verdicts)

    # -- validate_output ----------------------------------------------------------------------

    @activity.defn(name=VALIDATE_OUTPUT)
    async def validate_output(self, inp: ValidateInput) -> ValidateOutput:
        """The final answer checked against the output schema, then by each validator in turn
        (the first that refuses it gives the issue the model is told)."""
        data: Any = inp.answer
        if inp.output_schema is not None:
            parsed = parse_json_answer(inp.answer)
            if isinstance(parsed, ParseFailure):
                return ValidateOutput(ok=False, issue=parsed.message, failure_type="schema")
            model = self.registry.output_models.get(inp.output_schema.model or "")
            checked = check_schema(parsed, inp.output_schema.json_schema, model)
            if isinstance(checked, ParseFailure):
                return ValidateOutput(ok=False, data=parsed, issue=checked.message, failure_type="schema")
            data = checked
        run = await self.services.active_run(inp.task_id, inp.env)
        for name in inp.validators:
            validator = self.registry.validators[name]
            with activated(run):
                verdict = await with_heartbeat(self.services.user_code(validator.fn, data, label=f"validator {name!r}"))
            if verdict is True:
                continue
            issue = verdict if isinstance(verdict, str) and verdict else DEFAULT_FAILURE_MESSAGE
            return ValidateOutput(ok=False, data=to_jsonable_python(data), issue=issue, failure_type="validator")
        return ValidateOutput(ok=True, data=to_jsonable_python(data))
