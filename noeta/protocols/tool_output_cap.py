"""The cap on what one tool result sends to the model (``Options.max_tool_output_tokens``).

The transcript keeps every tool output whole (large ones in the content store, as references);
only the provider request is capped, when the worker builds it (noeta.context.requests). A tool
output beyond the cap reaches the model as its beginning and its end around a note saying how much
was left out and that the whole output is stored. The workflow issues the same commands with or
without a cap, so recorded histories replay unchanged.

Tokens here are an estimate: one token per ``BYTES_PER_TOKEN`` bytes of UTF-8. It is the usual
rule of thumb for English text and JSON with OpenAI's and Anthropic's tokenizers (docs/long-running.md
gives the measured figures); dense text (digits, hashes, CJK) takes more tokens per byte, so a cap
is a bound on bytes first, in units that read like the model's.
"""

from __future__ import annotations

#: Bytes of UTF-8 counted as one token by the cap.
BYTES_PER_TOKEN = 4

#: ``Options.max_tool_output_tokens``' default: about 100 KB of text per tool result. Enough for a
#: long file or a page of search results; a quarter of a 128k window at most, so one tool call cannot
#: push a conversation past its model's window by itself.
DEFAULT_MAX_TOOL_OUTPUT_TOKENS = 25_000

#: The smallest cap allowed: an output kept inline in history (at most 4 KiB, noeta.activities.tool_call)
#: always fits, and a preview has room for more than its note.
MIN_TOOL_OUTPUT_TOKENS = 1024

#: Of the preview (what is left of the cap after the note), the share taken from the output's start;
#: the rest is its end (where logs and stack traces put the error).
HEAD_SHARE = 0.75


def estimated_tokens(text: str) -> int:
    """The cap's estimate of ``text``'s tokens: its UTF-8 bytes over BYTES_PER_TOKEN, rounded up."""
    return -(-len(text.encode("utf-8", "replace")) // BYTES_PER_TOKEN)


def capped_tool_output(text: str, max_tokens: int | None) -> str:
    """``text`` as the model gets it under a cap of ``max_tokens`` (None: no cap): unchanged when it
    fits, else its start and end around a note naming the whole output's size and saying that it
    is kept. The result is at most ``max_tokens * BYTES_PER_TOKEN`` bytes of UTF-8."""
    if max_tokens is None or len(text) * 4 <= max_tokens * BYTES_PER_TOKEN:
        return text  # even at 4 bytes a character it fits: no need to encode it
    data = text.encode("utf-8", "replace")
    budget = max_tokens * BYTES_PER_TOKEN
    if len(data) <= budget:
        return text

    def note_for(left_out: int) -> str:
        return (
            f"\n\n[… {left_out} bytes of this tool output left out here: it has {len(data)} bytes "
            f"(about {-(-len(data) // BYTES_PER_TOKEN)} tokens), over the cap of {max_tokens} tokens "
            "(max_tool_output_tokens). The whole output is kept in the task's transcript; "
            "ask the tool for a narrower part of it if you need more. …]\n\n"
        )

    room = budget - len(note_for(len(data)).encode())
    head_bytes = int(room * HEAD_SHARE)
    head = data[:head_bytes].decode("utf-8", "ignore")
    tail = data[len(data) - (room - head_bytes):].decode("utf-8", "ignore")
    left_out = len(data) - len(head.encode()) - len(tail.encode())
    return head + note_for(left_out) + tail


__all__ = [
    "BYTES_PER_TOKEN", "DEFAULT_MAX_TOOL_OUTPUT_TOKENS", "HEAD_SHARE", "MIN_TOOL_OUTPUT_TOKENS",
    "capped_tool_output", "estimated_tokens",
]
