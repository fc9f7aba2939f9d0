"""How the CLI shows things on a terminal: conversation items, envelopes, task lists, approvals.
Pure functions from values to lines."""

from __future__ import annotations

import json
from typing import Any

from noeta.client.audit import AuditEntry
from noeta.client.client import PendingApproval
from noeta.client.messages import (
    AssistantMessage,
    InjectedMessage,
    Result,
    ToolResultView,
    ToolUse,
    UserMessage,
    ViewItem,
)
from noeta.client.visibility import TaskSummary
from noeta.protocols.event_log import EventEnvelope
from noeta.workflows.details import action_text, excerpt


def short(text: str, width: int = 100) -> str:
    """``text`` on one line (whitespace collapsed), cut to ``width`` characters with an ellipsis:
    as a task's Temporal UI details cut it, wider by default."""
    return excerpt(text, width)


def call_text(tool_name: str, arguments: dict[str, Any], width: int | None = None) -> str:
    """A tool call as ``name({...arguments})``, its arguments cut to ``width`` characters if given."""
    shown = json.dumps(arguments, ensure_ascii=False)
    return f"{tool_name}({shown if width is None else short(shown, width)})"


def render(item: ViewItem) -> str:
    """One message of a task's conversation as a line: its author, then its text."""
    if isinstance(item, UserMessage):
        return f"user      │ {item.text}"
    if isinstance(item, InjectedMessage):
        return f"{item.origin:<9} │ {item.text}"
    if isinstance(item, AssistantMessage):
        return f"assistant │ {item.text}"
    if isinstance(item, ToolUse):
        ran = f"tool call │ {call_text(item.tool_name, item.arguments)} [{item.call_id}]"
        if item.proposed_arguments is None:
            return ran
        return f"{ran} · edited by the approver, proposed {call_text(item.tool_name, item.proposed_arguments)}"
    if isinstance(item, ToolResultView):
        mark = "ok" if item.success else "FAILED"
        return f"tool {mark:<4} │ {item.tool_name}: {item.output or ''}"
    if isinstance(item, Result):
        return f"result    │ [{item.status}] {item.answer}"
    return repr(item)


def render_envelope(env: EventEnvelope) -> str:
    """One envelope as a line: seq, type, actor, cause and a short description of its payload."""
    cause = f"← {env.causation_id}" if env.causation_id else ""
    return f"{env.seq:>4} {env.type:<22} {env.actor:<24} {cause:<6} {describe(env)}".rstrip()


def describe(env: EventEnvelope) -> str:
    """One short line about the payload, for terminals."""
    p: Any = env.payload
    if env.type == "MessagesAppended":
        texts = []
        for m in p.messages:
            text = m.text or ", ".join(f"{u.tool_name}(…)" for u in m.tool_uses)
            texts.append(f"{m.role}: {text}")
        line = " | ".join(texts)
    elif env.type == "ToolCallRefused":
        line = f"{p.tool_name} [{p.call_id}] {p.reason}"
    elif env.type in ("ToolCallStarted", "ToolCallCompleted", "ToolCallFailed", "ToolCallRetried"):
        line = f"{p.tool_name} [{p.call_id}]" + (f" attempt {p.attempt}" if hasattr(p, "attempt") else "")
    elif env.type == "ProviderCallCompleted":
        line = f"{p.stop_reason} · {p.usage.input} in / {p.usage.output} out · attempt {p.attempt}"
        if p.usage.cost_usd:
            line += f" · ${p.usage.cost_usd:.6f}"
    elif env.type in ("ApprovalGranted", "ApprovalDenied"):
        line = approval_text(p)
    elif env.type == "ProviderFallback":
        line = f"{p.from_provider} → {p.to_provider}{f' ({p.to_model})' if p.to_model else ''}: {p.error_type}: {p.error}"
    elif env.type in ("BudgetWarning", "BudgetExceeded"):
        line = f"{p.limit}: {p.used:g} of {p.allowed:g}"
    elif env.type == "TaskCompleted":
        line = f"[{p.status}] {p.answer}"
    elif env.type == "TaskFailed":
        line = f"{p.error_type}: {p.reason}"
    elif env.type == "TaskStalled":
        line = f"{p.error_type}: {p.message}"
    elif env.type == "ContextCompacted":
        line = f"{p.strategy} ({p.reason}): {p.turns_folded} turn(s), {p.tokens_before} → {p.tokens_after} tokens"
    elif hasattr(p, "error"):
        line = str(p.error)
    else:
        line = ""
    return short(line.replace("\n", " "))


def cost_text(usd: float | None) -> str:
    """A task's cost for terminals (0 or None means no price was known for its model)."""
    return f"${usd:.6f}" if usd else "cost unknown (no price for the model)"


def task_line(t: TaskSummary) -> str:
    """One task of ``noeta tasks``: id, status, start, turns, tokens, model, goal and cost (and its
    agent version and worker version when it has them)."""
    started = t.started.strftime("%Y-%m-%d %H:%M:%S") if t.started else "?"
    goal = short(t.goal or "", 60)
    cost = f"${t.cost_usd:.6f}" if t.cost_usd else "unknown"
    return (
        f"{t.task_id:<28} {t.status:<18} {started}  turns {t.turns:<4} tokens {t.tokens_in}/{t.tokens_out}"
        f"  {t.model or '-'}  {goal}  cost {cost}" + (f"  fork of {t.forked_from}" if t.forked_from else "")
        + (f"  priority {t.priority}" if t.priority is not None else "")
        + (f"  agent {t.agent}" if t.agent else "") + (f"  worker {t.worker_version}" if t.worker_version else "")
    )


def approval_text(p: Any) -> str:
    """An answered approval: the call, who answered (and how identified), after how long, why, and
    the arguments an approver put in place of the proposed ones."""
    via = f" ({p.via})" if p.via else ""
    waited = f" after {p.waited_seconds:.0f}s" if p.waited_seconds is not None else ""
    line = f"[{p.call_id}] by {p.approver}{via}{waited}" + (f": {p.reason}" if p.reason else "")
    arguments = getattr(p, "arguments", None)
    if arguments is not None:
        line += f" · edited {json.dumps(p.proposed_arguments, ensure_ascii=False)} → {json.dumps(arguments, ensure_ascii=False)}"
    return line


def audit_line(entry: AuditEntry) -> str:
    """One audit entry as a line: when, what, who (how identified), the call and the detail."""
    at = entry.at.strftime("%Y-%m-%d %H:%M:%S") if entry.at else "?"
    call = f" [{entry.call_id}]" if entry.call_id else ""
    detail = f"  {short(entry.detail)}" if entry.detail else ""
    return f"{at}  {entry.action:<10} {entry.who} ({entry.via}){call}{detail}"


def approval_line(item: PendingApproval) -> str:
    """One pending approval as a line: task, call id, the action and the guard that asked (with its reason).
    """
    request = item.request
    why = f" — {request.reason}" if request.reason else ""
    return f"{item.task_id}  {request.call_id}  {action_text(request, call_text)}  [guard {request.guard}{why}]"
