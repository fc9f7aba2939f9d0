"""What a compaction makes of a transcript: pure functions over messages, shared by the worker's
``compact_context`` (which plans a compaction) and every place that builds a model request from a
compacted transcript (``call_model``, a recorded turn's replay).

A compacted transcript is the stored *view* (a list of messages) followed by the transcript from
message ``folded`` on (:class:`~noeta.protocols.activity_io.CompactedContext`). The view always
starts with the transcript's stable prefix (its first goal), so the provider's cache of the system
prompt, the tools and that goal keeps working across compactions. Turns are folded whole: the kept
part starts at an assistant message, so no tool result is ever separated from its call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

from pydantic import TypeAdapter

from noeta.protocols.compaction import SUMMARY_HEADER
from noeta.protocols.context_window import CHARS_PER_TOKEN, estimate_tokens
from noeta.protocols.messages import (
    Block,
    ContentRef,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

#: Media type of a stored view.
VIEW_MEDIA_TYPE = "application/vnd.noeta.context-view+json"
_MESSAGES = TypeAdapter(list[Message])
_LEFT_OUT = "[{} earlier turn(s) left out to fit the context window; the task's record keeps them]"
_LEFT_OUT_RE = re.compile(re.escape(_LEFT_OUT).replace(re.escape("{}"), r"(\d+)"))
#: Characters of one tool output shown to a summarizing call.
SUMMARY_OUTPUT_CHARS = 1000


def dump_view(messages: Sequence[Message]) -> bytes:
    """A view as the bytes stored for it."""
    return json.dumps(_MESSAGES.dump_python(list(messages), mode="json"), separators=(",", ":")).encode()


def load_view(data: bytes) -> list[Message]:
    """A stored view's messages."""
    return _MESSAGES.validate_json(data)


def compacted(view: Sequence[Message] | None, folded: int, transcript: Sequence[Message]) -> list[Message]:
    """What the model sees: ``view`` instead of the first ``folded`` messages of ``transcript``
    (``view`` None: the transcript as it is)."""
    if view is None:
        return list(transcript)
    return [*view, *transcript[folded:]]


def stable_prefix(transcript: Sequence[Message]) -> list[Message]:
    """The messages every view starts with: the first goal (the transcript's first message when a
    user wrote it)."""
    return [transcript[0]] if transcript and transcript[0].role == "user" else []


def turn_starts(transcript: Sequence[Message], start: int) -> list[int]:
    """Indexes from ``start`` on where a turn starts (an assistant message): the only places a
    transcript may be cut without parting a tool result from its call."""
    return [i for i in range(start, len(transcript)) if transcript[i].role == "assistant"]


def fold_point(transcript: Sequence[Message], folded: int, keep_tokens: int) -> int:
    """Where the kept part of ``transcript`` starts: the earliest turn start after ``folded`` whose
    tail fits ``keep_tokens``, else the last turn start (the newest turn is always kept). Returns
    ``folded`` when there is nothing to fold."""
    starts = [i for i in turn_starts(transcript, folded) if i > folded]
    if not starts:
        return folded
    tail, at = 0, len(transcript)  # the tail's tokens, counted once from the end
    fitting = None
    for i in reversed(starts):
        tail += estimate_tokens(transcript[i:at])
        at = i
        if tail > keep_tokens:
            break
        fitting = i
    return fitting if fitting is not None else starts[-1]


def turns_in(messages: Sequence[Message]) -> int:
    """The model turns among ``messages`` (one per assistant message)."""
    return sum(1 for m in messages if m.role == "assistant")


def summary_message(text: str) -> Message:
    """The injected message a summary enters the model's view as (origin "system")."""
    return Message(role="user", content=[TextBlock(SUMMARY_HEADER + text.strip())], origin="system")


def left_out_note(turns: int) -> Message:
    """The injected note (origin "system") that stands for ``turns`` turns left out of a view."""
    return Message(role="user", content=[TextBlock(_LEFT_OUT.format(turns))], origin="system")


def left_out(message: Message) -> int:
    """How many turns ``message`` says were left out, if it is such a note (else 0)."""
    if message.origin != "system":
        return 0
    found = _LEFT_OUT_RE.fullmatch(message.text)
    return int(found.group(1)) if found else 0


def preview(message: Message, chars: int, read: Callable[[ContentRef], str] | None = None) -> Message:
    """``message`` with each tool output longer than ``chars`` cut to a preview that says how long
    the whole is and where it is (a stored output: its content reference; ``read`` gives its text
    for the preview, else it gets the note alone)."""
    if not any(isinstance(b, ToolResultBlock) for b in message.content):
        return message
    content: list[Block] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            block = _previewed(block, chars, read)
        content.append(block)
    return Message(role=message.role, content=content, origin=message.origin)


def _previewed(block: ToolResultBlock, chars: int, read: Callable[[ContentRef], str] | None) -> ToolResultBlock:
    output = block.output
    if isinstance(output, ContentRef):
        start = read(output)[:chars] if read is not None and chars else ""
        note = f"[output of {output.size} bytes, compacted; the whole is in the content store as {output.hash}]"
        return ToolResultBlock(block.call_id, f"{start}… {note}" if start else note, block.success, error=block.error)
    if output is None or len(output) <= chars:
        return block
    cut = output[:chars] + f"… [output of {len(output)} characters, compacted to this preview]"
    return ToolResultBlock(block.call_id, cut, block.success, error=block.error, images=block.images)


def render(messages: Sequence[Message]) -> str:
    """``messages`` as plain text for a summarizing call (tool outputs cut to
    SUMMARY_OUTPUT_CHARS; stored outputs must be resolved first)."""
    lines = []
    for message in messages:
        for block in message.content:
            if isinstance(block, TextBlock) and block.text.strip():
                who = "context" if message.origin in ("system", "memory") else message.role
                lines.append(f"{who}: {block.text.strip()}")
            elif isinstance(block, ToolUseBlock):
                arguments = json.dumps(block.arguments, ensure_ascii=False, default=str)
                lines.append(f"assistant called {block.tool_name}({arguments})")
            elif isinstance(block, ToolResultBlock):
                text = block.output if isinstance(block.output, str) else (block.error or "")
                if len(text) > SUMMARY_OUTPUT_CHARS:
                    text = text[:SUMMARY_OUTPUT_CHARS] + f"… [{len(text) - SUMMARY_OUTPUT_CHARS} more characters]"
                state = "" if block.success else " (failed)"
                lines.append(f"tool result{state}: {text}")
            elif isinstance(block, ThinkingBlock):
                continue  # reasoning is not part of what happened
    return "\n".join(lines)


def fit_text(text: str, tokens: int) -> str:
    """``text`` cut in its middle to about ``tokens`` estimated tokens (its start holds an earlier
    summary, its end the latest turns)."""
    limit = int(tokens * CHARS_PER_TOKEN)
    if len(text) <= limit:
        return text
    half = max(0, limit // 2)
    return f"{text[:half]}\n[… {len(text) - 2 * half} characters left out …]\n{text[len(text) - half:]}"


__all__ = [
    "SUMMARY_OUTPUT_CHARS",
    "VIEW_MEDIA_TYPE",
    "compacted",
    "dump_view",
    "fit_text",
    "fold_point",
    "load_view",
    "left_out",
    "left_out_note",
    "preview",
    "render",
    "stable_prefix",
    "summary_message",
    "turn_starts",
    "turns_in",
]
