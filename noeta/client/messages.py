"""``as_messages``: an envelope stream projected into a human-readable view.

Each item's type is its author. Host-injected user-channel messages (origin "system" or "memory")
become :class:`InjectedMessage`, never :class:`UserMessage`, so a chat UI that renders only user
and assistant messages cannot show injected context by mistake.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, Union

from noeta.context.content_store import ContentStore
from noeta.protocols import event_log as ev
from noeta.protocols.messages import (
    ContentRef,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from noeta.protocols.statuses import ResultStatus


@dataclass(frozen=True)
class AssistantMessage:
    """Text the model wrote."""
    text: str


@dataclass(frozen=True)
class UserMessage:
    """A goal the user gave the task."""
    text: str


@dataclass(frozen=True)
class InjectedMessage:
    """Text the host added to the user channel (``origin`` "system" or "memory"), not the user's own words."""
    text: str
    origin: Literal["system", "memory"]


@dataclass(frozen=True)
class ToolUse:
    """A tool call the model made, with its arguments."""
    call_id: str
    tool_name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolResultView:
    """A tool call's result; ``output`` is its text (a stored large output is read from the content store;
    None when there is none)."""
    call_id: str
    tool_name: str
    success: bool
    output: str | None


@dataclass(frozen=True)
class ContextCompactedView:
    """Where the context the model sees was compacted (docs/long-running.md): from here on the
    model sees ``summary`` (or previews) instead of its oldest turns. The items before it stay in
    this list: it shows the whole conversation, not what the model was sent."""
    strategy: str
    turns_folded: int
    tokens_before: int
    tokens_after: int
    summary: str | None


@dataclass(frozen=True)
class Result:
    """The end of a goal. When ``status`` is "failed", ``answer`` holds the reason."""

    answer: str
    status: ResultStatus


ViewItem = Union[AssistantMessage, UserMessage, InjectedMessage, ToolUse, ToolResultView, ContextCompactedView, Result]


def _text(block: ToolResultBlock, store: ContentStore) -> str | None:
    if isinstance(block.output, ContentRef):
        return store.get(block.output).decode("utf-8", "replace")
    return block.output if block.output is not None else block.error


def as_messages(envelopes: Iterable[ev.EventEnvelope], content_store: ContentStore) -> list[ViewItem]:
    """Project envelopes into ViewItems. ``content_store`` must be the one paired with the stream:
    large bodies are dereferenced through it."""
    items: list[ViewItem] = []
    tool_names: dict[str, str] = {}
    for env in envelopes:
        payload = env.payload
        if isinstance(payload, ev.MessagesAppended):
            for message in payload.messages:
                text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
                if message.role == "user":
                    if message.origin in ("system", "memory"):
                        items.append(InjectedMessage(text=text, origin=message.origin))
                    else:
                        items.append(UserMessage(text=text))
                elif message.role == "assistant":
                    if text:
                        items.append(AssistantMessage(text=text))
                    for block in message.content:
                        if isinstance(block, ToolUseBlock):
                            tool_names[block.call_id] = block.tool_name
                            items.append(ToolUse(block.call_id, block.tool_name, dict(block.arguments)))
                elif message.role == "tool":
                    for block in message.content:
                        if isinstance(block, ToolResultBlock):
                            items.append(
                                ToolResultView(
                                    call_id=block.call_id,
                                    tool_name=tool_names.get(block.call_id, "?"),
                                    success=block.success,
                                    output=_text(block, content_store),
                                )
                            )
        elif isinstance(payload, ev.ContextCompacted):
            items.append(
                ContextCompactedView(
                    payload.strategy, payload.turns_folded, payload.tokens_before, payload.tokens_after, payload.summary
                )
            )
        elif isinstance(payload, ev.TaskCompleted):
            items.append(Result(answer=payload.answer, status=payload.status))
        elif isinstance(payload, ev.TaskFailed):
            items.append(Result(answer=payload.reason, status="failed"))
        elif isinstance(payload, ev.TaskCancelled):
            items.append(Result(answer=payload.reason, status="cancelled"))
    return items
