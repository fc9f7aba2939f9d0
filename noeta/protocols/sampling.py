"""An MCP server asking the task's model during a tool call (the spec's ``sampling/createMessage``),
as a recorded model call of the task: the request, what guards see of it, and the answer given back
to the server. Pure: the workflow, the worker and the client use it.

Like a server's question to a person (noeta.protocols.elicitation), the request stops the call: its
activity fails with ``McpSamplingRequiredError`` carrying the request; the workflow shows it to the
task's guards, makes the model call on the task's provider (within its budget, counted in its usage
and events), then makes the tool call again with the answers so far, which the worker returns to the
server's requests in order. A server whose configuration does not set ``sampling`` is refused, and
its call fails with ``McpSamplingNotAllowedError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from noeta.protocols.server_requests import ServerRequest

#: The ApplicationError type of a tool call that stopped to have the task's model answer its server.
SAMPLING_REQUIRED = "McpSamplingRequiredError"
#: At most this many model calls per tool call: a server that keeps asking fails the call.
MAX_SAMPLES_PER_CALL = 8
#: The error code a refused request gets (the spec's example for a request the user rejected).
REFUSED_CODE = -1


@dataclass(frozen=True, slots=True)
class ProposedSampling(ServerRequest):
    """An MCP server wants the task's model to answer ``text`` (its messages, as text) during tool
    call ``tool_call_id``: what the task's guards judge before the model is called. ``call_id``
    (``sample:<tool call id>:<n>``) names it in verdicts and approvals."""
    text: str
    system_prompt: str | None = None
    max_tokens: int | None = None
    type: Literal["sampling"] = field(default="sampling", kw_only=True)


@dataclass(frozen=True, slots=True)
class SamplingCall:
    """Set on a model call made for a server's sampling request: the call answers the server, not
    the task's conversation (its answer joins no transcript), with the server's own system prompt
    (stop sequences and model preferences are not passed on: the task's provider and model answer)."""
    call_id: str
    tool_call_id: str
    server: str
    system_prompt: str | None = None


@dataclass(frozen=True, slots=True)
class SampledAnswer:
    """The task's answer to one sampling request: the model's text (``model`` that wrote it), or
    why it was refused (a guard's denial, a person's refusal), returned to the server as an error."""
    text: str = ""
    model: str = ""
    stop_reason: str | None = None
    refused: str | None = None


def sampling_id(tool_call_id: str, index: int) -> str:
    """The id of the ``index``-th (from 1) sampling request of a tool call."""
    return f"sample:{tool_call_id}:{index}"


def message_text(content: Any) -> str:
    """The text of one sampling message's content (a block or a list of blocks); other blocks
    (images, audio, tool uses) are named, not sent: the task's model answers in text."""
    blocks = content if isinstance(content, list) else [content]
    parts = []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict):
            parts.append(f"[{block.get('type', 'content')} omitted]")
    return "\n".join(parts)


def request_text(request: dict[str, Any]) -> str:
    """A sampling request's messages as one text (what guards and the Temporal UI see)."""
    return "\n".join(
        f"{m.get('role', 'user')}: {message_text(m.get('content'))}" for m in request.get("messages") or [] if isinstance(m, dict)
    )


__all__ = [
    "MAX_SAMPLES_PER_CALL",
    "REFUSED_CODE",
    "SAMPLING_REQUIRED",
    "ProposedSampling",
    "SampledAnswer",
    "SamplingCall",
    "message_text",
    "request_text",
    "sampling_id",
]
