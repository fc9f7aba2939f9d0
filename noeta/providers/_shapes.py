"""Reading provider answers: shape checks and the field readers both HTTP adapters share.

A 2xx body that lacks the shape of its API (``choices[0].message`` null, ``tool_calls: "oops"``, a
content block that is not an object) raises :class:`~noeta.errors.ProviderResponseError`, which
names the field and is retried like a server fault; it never surfaces as an ``AttributeError`` or an
empty "completed" answer. Fields that are merely absent get their documented defaults.
"""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

from noeta.errors import ProviderResponseError
from noeta.protocols.messages import Block, StopReason, ToolResultBlock, ToolUseBlock
from noeta.security.scrub import scrub


class Shape:
    """Checks on one provider's answer; each failure names the field that broke the shape."""

    def __init__(self, provider: str) -> None:
        self.provider = provider

    def error(self, where: str, expected: str, value: Any) -> ProviderResponseError:
        shown = json.dumps(value, default=str)[:200] if value is not None else "null"
        return ProviderResponseError(
            provider=self.provider,
            message=scrub(f"malformed response: {where} is {shown}, expected {expected}"),
            retryable=True,
        )

    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(where, "an object", value)
        return value

    def list_or_none(self, value: Any, where: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(where, "a list", value)
        return value

    def text_or_none(self, value: Any, where: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.error(where, "a string", value)
        return value

    def name(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.error(where, "a non-empty string", value)
        return value


def count(value: Any) -> int:
    """A token count from a usage object: anything that is not a number counts as 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0
    return max(0, int(value))


def fallback_call_id() -> str:
    """A unique id for a tool call the server sent without one (ids must not repeat in a task)."""
    return f"call_{uuid.uuid4().hex[:16]}"


def stop_reason_for(content: list[Block], reported: StopReason) -> StopReason:
    """Tool calls in the answer decide: some servers report "stop" with tool calls, or claim tool
    calls and send none."""
    if any(isinstance(b, ToolUseBlock) for b in content):
        return "tool_use"
    return "end_turn" if reported == "tool_use" else reported


def parse_arguments(arguments: Any) -> dict[str, Any]:
    """Tool arguments as a dict; malformed JSON is kept as ``{"_raw": text}`` for the agent loop
    to report back to the model instead of failing the call."""
    if isinstance(arguments, dict):
        return arguments
    if arguments is None or arguments == "":
        return {}
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    try:
        parsed = json.loads(text)
    except ValueError:
        return {"_raw": text}
    return parsed if isinstance(parsed, dict) else {"_raw": text}


def tool_result_text(result: ToolResultBlock) -> str:
    """The text a provider gets for a tool result (its output, else its error)."""
    if isinstance(result.output, str) and result.output:
        return result.output
    return result.error or (result.output if isinstance(result.output, str) else "")


def error_type(payload: Any) -> str | None:
    """The provider's own type of an error body: ``error.type`` (Anthropic's ``overloaded_error``,
    OpenAI's ``insufficient_quota``...), else ``error.code``."""
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        return None
    for key in ("type", "code"):
        value = error.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def error_text(payload: Any) -> str | None:
    """The message of an error body: ``{"error": {"message": ...}}`` and its common variants."""
    if not isinstance(payload, dict):
        return None
    error = payload.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    message = payload.get("message")
    return message if isinstance(message, str) else None
