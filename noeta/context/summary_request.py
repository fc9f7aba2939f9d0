"""The request a compaction's summary is asked with (noeta.activities.compaction).

On the task's own prefix: the request the task's next model call would send (its system prompt, its
tools, its messages with the same caps), cut where the folded turns end, then the summarizing
instruction as one more user message. Its bytes up to the cut are the task's own requests' bytes,
so a provider's prefix cache (OpenAI's and others' automatic one, Anthropic's breakpoints, which
get one at the cut) serves them: only the instruction and the summary are paid in full.

As text: the folded turns rendered as plain text and cut to fit, under the instruction, still after
the task's system prompt and tools. For folded turns too long to be sent as they are (a context the
provider refused), and for inputs recorded before the prefix was sent (the instruction was the
system prompt then).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from noeta.protocols.compaction import SUMMARY_INSTRUCTION, SUMMARY_REQUEST
from noeta.protocols.context_window import estimate_tokens, text_tokens
from noeta.protocols.messages import LLMRequest, Message, TextBlock


def request_tokens(request: LLMRequest) -> int:
    """The estimated tokens of ``request``'s input: its system prompt, tools and messages."""
    tools = json.dumps(request.tools, separators=(",", ":")) if request.tools else ""
    return text_tokens(request.system or "") + text_tokens(tools) + estimate_tokens(request.messages)


def on_prefix(ordinary: LLMRequest, cut: int, max_tokens: int, metadata: dict[str, Any]) -> LLMRequest:
    """``ordinary`` (the task's next request) cut after its first ``cut`` messages, with the
    summarizing instruction after them; no output schema, thinking or effort (a summary is text),
    the cache breakpoint at the cut."""
    messages = [*ordinary.messages[:cut], Message("user", [TextBlock(SUMMARY_REQUEST)], origin="system")]
    return dataclasses.replace(
        ordinary,
        messages=messages,
        max_tokens=max_tokens,
        temperature=0,
        output_schema=None,
        thinking=None,
        effort=None,
        metadata={**metadata, "cache_breakpoint_message": cut - 1} if cut > 0 else dict(metadata),
    )


def as_text(
    text: str, model: str | None, max_tokens: int, metadata: dict[str, Any], ordinary: LLMRequest | None = None
) -> LLMRequest:
    """The folded turns as ``text`` under the summarizing instruction: after ``ordinary``'s system
    prompt and tools (their cache still serves), or (None) with the instruction as the system prompt."""
    if ordinary is None:
        return LLMRequest(
            model=model, system=SUMMARY_INSTRUCTION, messages=[Message("user", [TextBlock(text)])],
            max_tokens=max_tokens, temperature=0, metadata=dict(metadata),
        )
    body = Message("user", [TextBlock(f"{SUMMARY_INSTRUCTION}\n\n{text}")], origin="system")
    return LLMRequest(
        model=ordinary.model, system=ordinary.system, tools=ordinary.tools, messages=[body],
        max_tokens=max_tokens, temperature=0, metadata=dict(metadata),
    )


def fits(summarizing: LLMRequest, ordinary: LLMRequest, tokens_before: int, room: int) -> bool:
    """Whether ``summarizing`` fits ``room`` tokens, its estimate scaled by how the task's count of
    ``ordinary`` (``tokens_before``) compares with the estimate of it."""
    estimate, whole = request_tokens(summarizing), request_tokens(ordinary)
    ratio = min(2.0, max(0.5, tokens_before / whole)) if tokens_before > 0 and whole > 0 else 1.0
    return estimate * ratio <= room


__all__ = ["as_text", "fits", "on_prefix", "request_tokens"]
