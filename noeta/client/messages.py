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
    """A tool call the model made, with the arguments it ran with."""
    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    """The arguments the call ran with: an approver's edit when there was one (then
    ``proposed_arguments`` holds the model's), else the model's own."""
    proposed_arguments: dict[str, Any] | None = None
    """The model's arguments when an approver replaced them (None: the call ran as proposed)."""

    @property
    def edited(self) -> bool:
        """Whether an approver changed the arguments before the call ran."""
        return self.proposed_arguments is not None


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
    """Deprecated: no longer a :data:`ViewItem`, and ``as_messages`` no longer yields it (kept
    importable for code that names it). A compaction now appears as what it put into the
    transcript: an :class:`InjectedMessage` (origin "system") carrying the summary; the full record
    is the ``ContextCompacted`` event."""
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


#: The seed's six view types, and only those (a compaction is an InjectedMessage).
ViewItem = Union[AssistantMessage, UserMessage, InjectedMessage, ToolUse, ToolResultView, Result]


def _tool_use(block: ToolUseBlock, edit: ev.ApprovalGranted | None) -> ToolUse:
    if edit is None or edit.arguments is None:
        return ToolUse(block.call_id, block.tool_name, dict(block.arguments))
    proposed = edit.proposed_arguments if edit.proposed_arguments is not None else block.arguments
    return ToolUse(block.call_id, block.tool_name, dict(edit.arguments), dict(proposed))


def compaction_text(payload: ev.ContextCompacted, first: int, last: int) -> str:
    """What a compaction put into the model's transcript, as its conversation item: a short marker
    naming the turns it folded (shown in full above it) and its sizes, then the summary the model
    reads from then on (previews or a compactor's own view have none)."""
    where = f"turns {first}-{last}" if last > first else f"turn {last}" if last >= first else "earlier turns"
    marker = (
        f"[context compacted ({payload.strategy}, {payload.reason}): {payload.turns_folded} turn(s) folded, "
        f"{where} above; {payload.tokens_before} -> {payload.tokens_after} tokens]"
    )
    return f"{marker}\n\n{payload.summary}" if payload.summary else marker


def _text(block: ToolResultBlock, store: ContentStore) -> str | None:
    if isinstance(block.output, ContentRef):
        return store.get(block.output).decode("utf-8", "replace")
    return block.output if block.output is not None else block.error


def as_messages(envelopes: Iterable[ev.EventEnvelope], content_store: ContentStore) -> list[ViewItem]:
    """Project envelopes into ViewItems. ``content_store`` must be the one paired with the stream:
    large bodies are dereferenced through it."""
    envelopes = list(envelopes)
    # What ran is what the approver let run: an edit replaces the model's arguments (both shown).
    edits = {
        env.payload.call_id: env.payload
        for env in envelopes
        if isinstance(env.payload, ev.ApprovalGranted) and env.payload.arguments is not None
    }
    items: list[ViewItem] = []
    tool_names: dict[str, str] = {}
    turns = folded = 0  # model turns seen, and how many of them compactions have folded so far
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
                    turns += 1
                    if text:
                        items.append(AssistantMessage(text=text))
                    for block in message.content:
                        if isinstance(block, ToolUseBlock):
                            tool_names[block.call_id] = block.tool_name
                            items.append(_tool_use(block, edits.get(block.call_id)))
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
            first, folded = folded + 1, min(turns, folded + payload.turns_folded)
            items.append(InjectedMessage(text=compaction_text(payload, first, folded), origin="system"))
        elif isinstance(payload, ev.TaskCompleted):
            items.append(Result(answer=payload.answer, status=payload.status))
        elif isinstance(payload, ev.GoalInterrupted):
            items.append(Result(answer=payload.answer, status="interrupted"))
        elif isinstance(payload, ev.TaskFailed):
            items.append(Result(answer=payload.reason, status="failed"))
        elif isinstance(payload, ev.TaskCancelled):
            items.append(Result(answer=payload.reason, status="cancelled"))
    return items
