"""What a task is doing or waiting for, shown as "Current Details" on its Temporal UI page.

``workflow.set_current_details`` is not a command: nothing here is stored in history, and a live
worker answers the UI's metadata query with the latest text. So it can change as often as the
task moves, at no cost, and replay never depends on it. Markdown, a few short lines.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from temporalio import workflow

from noeta.protocols.elicitation import CANCEL_REASON, ElicitationRequest
from noeta.protocols.login_wait import LoginRequest
from noeta.protocols.hooks import ProposedFinish, ProposedSpawnSubtask, ProposedToolCall
from noeta.protocols.sampling import ProposedSampling
from noeta.protocols.messages import ToolUseBlock
from noeta.protocols.names import UPDATE_APPROVE, UPDATE_REFUSE, UPDATE_SEND_GOAL
from noeta.protocols.statuses import GoalOutcome
from noeta.protocols.task import ApprovalRequest

#: Longest rendering of one call's arguments or of a goal/answer excerpt.
EXCERPT_CHARS = 80


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_text(tool_name: str, arguments: dict[str, Any]) -> str:
    """``issue_refund(order=9917, amount=250)``: readable at a glance, values as compact JSON."""
    parts = [f"{k}={json.dumps(v, ensure_ascii=False, separators=(',', ':'), default=str)}" for k, v in arguments.items()]
    return f"{tool_name}({excerpt(', '.join(parts))})"


def action_text(request: ApprovalRequest, tool_call: Callable[[str, dict[str, Any]], str] = call_text) -> str:
    """What an action waiting for approval would do: the tool call (as ``tool_call`` writes it:
    here its arguments cut short, the CLI shows them whole), the subtask's goal or the answer."""
    action = request.action
    if isinstance(action, ProposedToolCall):
        return tool_call(action.tool_name, action.arguments)
    if isinstance(action, ProposedSpawnSubtask):
        return f"subtask “{excerpt(action.goal)}”"
    if isinstance(action, ProposedFinish):
        return f"finishing with “{excerpt(action.answer)}”"
    if isinstance(action, ProposedSampling):
        return f"MCP server {action.server} asks the task's model during {action.tool_name}: “{excerpt(action.text)}”"
    if isinstance(action, LoginRequest):
        return f"MCP server {action.server} needs a new login with scope '{action.scope}' for {action.tool_name}: run `{action.command}`"
    if isinstance(action, ElicitationRequest):
        fields = ", ".join(action.requested_schema.get("properties") or {}) or "none"
        return f"MCP server {action.server} asks “{excerpt(action.message)}” during {action.tool_name} (fields: {fields})"
    return request.call_id


def awaiting_approval(pending: Iterable[ApprovalRequest], timeout_seconds: float) -> str:
    """The details of pending approvals: each action with its guard and reason, and how to approve
    or refuse it."""
    lines = []
    for request in pending:
        if isinstance(request.action, ElicitationRequest):
            lines.append(f"**awaiting an answer**: {action_text(request)}")
            lines.append(
                f"accept: Send an Update → `{UPDATE_APPROVE}` with "
                f'`{{"call_id": "{request.call_id}", "approved": true, "arguments": {{...the fields...}}}}`; '
                f"decline: `{UPDATE_REFUSE}` with `{{\"call_id\": \"{request.call_id}\"}}`; "
                f"cancel: the same with `\"reason\": \"{CANCEL_REASON}\"`"
            )
            continue
        if isinstance(request.action, LoginRequest):
            lines.append(f"**awaiting a login**: {action_text(request)}")
            lines.append(
                f"once logged in: Send an Update → `{UPDATE_APPROVE}` with "
                f'`{{"call_id": "{request.call_id}", "approved": true}}` (the call is made again); '
                f"give up: `{UPDATE_REFUSE}` with `{{\"call_id\": \"{request.call_id}\"}}` (the call fails)"
            )
            continue
        reason = f": {excerpt(request.reason)}" if request.reason else ""
        lines.append(f"**awaiting approval**: {action_text(request)} — guard {request.guard}{reason}")
        lines.append(
            f"approve: Send an Update → `{UPDATE_APPROVE}` with "
            f'`{{"call_id": "{request.call_id}", "approved": true}}`; '
            f"refuse: the same to `{UPDATE_REFUSE}` with `\"approved\": false`"
        )
    lines.append(f"unanswered after {timeout_seconds:g} s: refused (a server's question: declined)")
    return "\n\n".join(lines)


def calling_model(provider: str, model: str | None, turn: int, max_turns: int) -> str:
    """The details while the model is called: provider, model and the goal's turn."""
    return f"**calling the model**: {provider} {model or '(default model)'} · turn {turn} of {max_turns}"


def running_tools(calls: Sequence[ToolUseBlock]) -> str:
    """The details while tools run: each call with its arguments."""
    return "**running tools**: " + ", ".join(call_text(c.tool_name, c.arguments) for c in calls)


def checking_guards(ids: Sequence[str]) -> str:
    """The details while guards check the actions ``ids``."""
    return f"**checking guards** on {', '.join(ids)}"


def validating(validators: int, schema: bool) -> str:
    """The details while the answer is validated (by the output schema and/or the validators)."""
    what = " and ".join(x for x in ("the output schema" if schema else "", f"{validators} validator(s)" if validators else "") if x)
    return f"**validating the answer** against {what}"


def running_subtask(child_id: str, goal: str) -> str:
    """The details while a subtask runs."""
    return f"**waiting for subtask** `{child_id}`: {excerpt(goal)}"


def idle(goals_done: int) -> str:
    """The details of a keep-open task waiting for its next goal, and how to send one."""
    return (
        f"**idle**: {goals_done} goal(s) done; waiting for the next goal (`{UPDATE_SEND_GOAL}` update, "
        "`noeta send`, or the console)"
    )


def finished(status: GoalOutcome, answer: str) -> str:
    """The details when a goal has ended."""
    return f"**goal {status}**: {excerpt(answer)}"


class CurrentDetails:
    """The latest step, with pending approvals on top (they are what a person can act on) and a
    store outage the step is riding out above the step."""

    def __init__(self) -> None:
        """Starts with nothing to say."""
        self._doing = ""
        self._outage = ""

    def doing(self, text: str, pending: dict[str, ApprovalRequest], timeout_seconds: float) -> None:
        """Set what the task does now and show it (under any pending approvals); a new step means
        the store took the last one's output: an outage shown is over."""
        self._doing, self._outage = text, ""
        self.refresh(pending, timeout_seconds)

    def outage(self, text: str, pending: dict[str, ApprovalRequest], timeout_seconds: float) -> None:
        """Show that the current step waits for the content store (``text``, from the step's worker)."""
        self._outage = text
        self.refresh(pending, timeout_seconds)

    def refresh(self, pending: dict[str, ApprovalRequest], timeout_seconds: float) -> None:
        """Show the current step under the pending approvals as the workflow's current details."""
        doing = f"{self._outage}\n\n{self._doing}" if self._outage and self._doing else self._outage or self._doing
        if pending:
            text = awaiting_approval(pending.values(), timeout_seconds)
            if doing:
                text += f"\n\nthen: {doing}"
        else:
            text = doing
        workflow.set_current_details(text)
