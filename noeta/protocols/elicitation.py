"""An MCP server asking the user back during a tool call (the spec's ``elicitation/create``), as a
durable wait of the task: the request a person answers, the answer, and the checks on it.

A server's request reaches the worker in the middle of a tool call. The worker holds the request
open only for a short grace period (noeta.protocols.held_questions), never while a person takes
minutes or days: then the call's activity fails with ``McpInputRequiredError`` carrying the
request, the workflow lists it among the task's pending approvals (a :class:`ElicitationRequest`
action) and waits durably for the answer (the ``approve`` or ``refuse`` update, or its timeout, a
decline), then makes the tool call again with the answers given so far, which the worker returns
to the server's requests in order. Pure: the workflow and the client use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from noeta.protocols.server_requests import ServerRequest

#: The ApplicationError type of a tool call that stopped to ask a person.
INPUT_REQUIRED = "McpInputRequiredError"
#: At most this many questions per tool call: a server that keeps asking fails the call.
MAX_ELICITATIONS_PER_CALL = 8
#: The reason a refusal carries to cancel (dismiss) rather than decline (the spec's two refusals).
CANCEL_REASON = "cancel"

ElicitAction = Literal["accept", "decline", "cancel"]
_TYPES = {"string": (str,), "number": (int, float), "integer": (int,), "boolean": (bool,)}


@dataclass(frozen=True, slots=True)
class ElicitationRequest(ServerRequest):
    """What a server asked during a tool call: the pending action a person answers. Its
    ``call_id`` (``elicit:<tool call id>:<n>``) is what ``approve``/``refuse`` name."""
    message: str
    requested_schema: dict[str, Any] = field(default_factory=dict)
    """The flat object schema the answer's content must match (the spec's restricted subset)."""
    type: Literal["elicitation"] = field(default="elicitation", kw_only=True)


@dataclass(frozen=True, slots=True)
class ElicitationAnswer:
    """A person's answer, given back to the server: accept with content, decline, or cancel."""
    action: ElicitAction
    content: dict[str, Any] | None = None


def elicitation_id(tool_call_id: str, index: int) -> str:
    """The id of the ``index``-th (from 1) question of a tool call."""
    return f"elicit:{tool_call_id}:{index}"


def with_defaults(schema: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    """``content`` with each absent property that declares a ``default`` filled with it (the
    spec's SEP-1034: a client applies the schema's defaults)."""
    filled = dict(content)
    for name, prop in (schema.get("properties") or {}).items():
        if name not in filled and isinstance(prop, dict) and "default" in prop:
            filled[name] = prop["default"]
    return filled


def content_problem(schema: dict[str, Any], content: Any) -> str | None:
    """Why ``content`` does not match the requested ``schema`` (None: it does). Checks the
    spec's subset: a flat object of strings (length, format-free), numbers, integers (bounds),
    booleans and enums, and the required names."""
    if not isinstance(content, dict):
        return "the content must be a JSON object"
    props = schema.get("properties") or {}
    missing = [n for n in schema.get("required") or [] if n not in content]
    if missing:
        return f"missing required field(s): {', '.join(missing)}"
    for name, value in content.items():
        prop = props.get(name)
        if not isinstance(prop, dict):
            return f"unknown field {name!r} (expected: {', '.join(props) or 'none'})"
        problem = _value_problem(prop, value)
        if problem:
            return f"{name}: {problem}"
    return None


def _value_problem(prop: dict[str, Any], value: Any) -> str | None:
    kind = prop.get("type")
    choices = prop.get("enum")
    if isinstance(value, bool) and kind in ("number", "integer"):
        return f"expected {kind}, got a boolean"
    if kind in _TYPES and not isinstance(value, _TYPES[kind]):
        return f"expected {kind}, got {type(value).__name__}"
    if kind == "array":
        items = (prop.get("items") or {}).get("enum") or (prop.get("items") or {}).get("anyOf")
        if not isinstance(value, list):
            return "expected an array"
        allowed = [c["const"] if isinstance(c, dict) else c for c in items or []]
        if allowed and any(v not in allowed for v in value):
            return f"each item must be one of {allowed}"
        return None
    if isinstance(choices, list) and value not in choices:
        return f"must be one of {choices}"
    one_of = prop.get("oneOf")
    if isinstance(one_of, list) and value not in [c.get("const") for c in one_of if isinstance(c, dict)]:
        return "must be one of the listed options"
    if isinstance(value, str):
        if len(value) < prop.get("minLength", 0) or len(value) > prop.get("maxLength", math.inf):
            return "length out of range"
    elif isinstance(value, (int, float)):
        if value < prop.get("minimum", -math.inf) or value > prop.get("maximum", math.inf):
            return "out of range"
    return None


def answer_of(approved: bool, reason: str | None, content: dict[str, Any] | None, schema: dict[str, Any]) -> ElicitationAnswer:
    """A person's approval/refusal as the server's answer: approved is accept (with the content,
    the schema's defaults filled in), a refusal whose reason is ``cancel`` cancels, any other
    refusal (and a timeout) declines."""
    if approved:
        return ElicitationAnswer("accept", with_defaults(schema, content or {}))
    return ElicitationAnswer("cancel" if (reason or "").strip().lower() == CANCEL_REASON else "decline")


__all__ = [
    "CANCEL_REASON",
    "INPUT_REQUIRED",
    "MAX_ELICITATIONS_PER_CALL",
    "ElicitAction",
    "ElicitationAnswer",
    "ElicitationRequest",
    "answer_of",
    "content_problem",
    "elicitation_id",
    "with_defaults",
]
