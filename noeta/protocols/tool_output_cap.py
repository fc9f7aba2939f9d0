"""The cap on what one tool result sends to the model (``Options.max_tool_output_tokens``).

The transcript keeps every tool output whole (large ones in the content store, as references);
only the provider request is capped, when the worker builds it (noeta.context.requests). A tool
output beyond the cap reaches the model as its beginning and its end around a note saying how much
was left out and that the whole output is stored. The workflow issues the same commands with or
without a cap, so recorded histories replay unchanged.

Tokens are counted as compaction counts them (noeta.protocols.context_window.text_tokens: by the
kinds of characters, measured against a real tokenizer in docs/long-running.md), and the capped
text is cut where that count cuts it. A count by kinds of characters lets some text be long and
cheap (a run of spaces is one token), so the capped text is held to MAX_BYTES_PER_TOKEN bytes of
UTF-8 a token as well.
"""

from __future__ import annotations

from noeta.protocols.context_window import text_pieces, text_tokens

#: ``Options.max_tool_output_tokens``' default: about 100-150 KB of prose, code or JSON per tool
#: result. Enough for a long file or a page of search results; a fifth of a 128k window at most, so
#: one tool call cannot push a conversation past its model's window by itself.
DEFAULT_MAX_TOOL_OUTPUT_TOKENS = 25_000

#: The smallest cap allowed: a preview has room for more than its note.
MIN_TOOL_OUTPUT_TOKENS = 1024

#: Bytes of UTF-8 a capped text may hold per token of its cap, whatever it counts as (prose is
#: 4-6 bytes a token by the count; only long runs of spaces or very long words reach 8).
MAX_BYTES_PER_TOKEN = 8

#: Of the preview (what is left of the cap after the note), the share taken from the output's start;
#: the rest is its end (where logs and stack traces put the error).
HEAD_SHARE = 0.75


def capped_tool_output(text: str, max_tokens: int | None) -> str:
    """``text`` as the model gets it under a cap of ``max_tokens`` (None: no cap): unchanged when it
    fits, else its start and end around a note naming the whole output's size and saying that it
    is kept. The result counts at most ``max_tokens`` tokens (``text_tokens``) and holds at most
    ``max_tokens * MAX_BYTES_PER_TOKEN`` bytes of UTF-8."""
    if max_tokens is None or len(text) <= max_tokens:
        return text  # at most a token a character: it fits without counting
    most_bytes = max_tokens * MAX_BYTES_PER_TOKEN
    # A text longer than the byte bound is cut without being counted whole (it may be 50 MB).
    if len(text) <= most_bytes and len(text.encode("utf-8", "replace")) <= most_bytes and text_tokens(text) <= max_tokens:
        return text
    size = len(text.encode("utf-8", "replace"))

    def note_for(left_out: int) -> str:
        return (
            f"\n\n[… {left_out} bytes of this tool output left out here: it has {size} bytes, over the cap of "
            f"{max_tokens} tokens (max_tool_output_tokens). The whole output is kept in the task's transcript; "
            "ask the tool for a narrower part of it if you need more. …]\n\n"
        )

    longest_note = note_for(size)
    # One token spare: the count rounds a sum of fractions up.
    room_tokens = max_tokens - 1 - sum(t for _, t in text_pieces(longest_note))
    room_bytes = most_bytes - len(longest_note.encode())
    head = _leading(text, room_tokens * HEAD_SHARE, int(room_bytes * HEAD_SHARE))
    head_tokens = sum(t for _, t in text_pieces(head))
    tail = _trailing(text[len(head):], room_tokens - head_tokens, room_bytes - len(head.encode("utf-8", "replace")))
    left_out = size - len(head.encode("utf-8", "replace")) - len(tail.encode("utf-8", "replace"))
    return head + note_for(left_out) + tail


def _leading(text: str, tokens: float, most_bytes: int) -> str:
    """The longest start of ``text`` made of whole pieces within ``tokens`` and ``most_bytes``."""
    taken, spent, used = 0, 0.0, 0
    for piece, cost in text_pieces(text[:most_bytes]):  # a character is at least a byte
        size = len(piece.encode("utf-8", "replace"))
        if spent + cost > tokens or used + size > most_bytes:
            break
        taken, spent, used = taken + len(piece), spent + cost, used + size
    return text[:taken]


def _trailing(text: str, tokens: float, most_bytes: int) -> str:
    """The longest end of ``text`` made of whole pieces within ``tokens`` and ``most_bytes``."""
    if tokens <= 0 or most_bytes <= 0:
        return ""
    pieces = list(text_pieces(text[-most_bytes:]))
    taken, spent, used = 0, 0.0, 0
    for piece, cost in reversed(pieces):
        size = len(piece.encode("utf-8", "replace"))
        if spent + cost > tokens or used + size > most_bytes:
            break
        taken, spent, used = taken + len(piece), spent + cost, used + size
    return text[len(text) - taken:] if taken else ""


__all__ = [
    "DEFAULT_MAX_TOOL_OUTPUT_TOKENS", "HEAD_SHARE", "MAX_BYTES_PER_TOKEN", "MIN_TOOL_OUTPUT_TOKENS",
    "capped_tool_output",
]
