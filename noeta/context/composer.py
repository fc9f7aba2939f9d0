"""The composer: how a task's system prompt, content channels and transcript become a request.

Layout, stable part first so providers can cache it::

    [tools] [system prompt + stable channels]  |  [transcript ...]  |  [volatile channels]
            ------ cache boundary 1 ------------ cache boundary 2 --  (never cached)

Boundary 1 changes only if the task's definition changes; boundary 2 moves forward one step per
model call, so each call reuses the previous call's cached prefix. Adapters that support explicit
cache breakpoints (Anthropic) get them from ``LLMRequest.metadata["cache_breakpoint_message"]``;
OpenAI-style automatic prefix caching benefits from the same ordering. The resulting plan is
recorded (``ContextPlanComposed``) so a cache hit rate is measurable against ``Usage.cache_read``.
"""

from __future__ import annotations

from collections.abc import Sequence

from noeta.protocols.messages import Message, TextBlock
from noeta.protocols.task import ChannelContent, ChannelUse, ContextPlan


def section(channel: ChannelContent) -> str:
    """A content channel as a Markdown section: its name as a heading, then its text."""
    return f"## {channel.name}\n{channel.text}"


def compose_system(system_prompt: str | None, channels: list[ChannelContent]) -> tuple[str, str, ContextPlan]:
    """(system text, volatile text, plan) for a task."""
    stable = [c for c in channels if c.stable]
    volatile = [c for c in channels if not c.stable]
    system = "\n\n".join([p for p in [system_prompt or ""] if p] + [section(c) for c in stable])
    volatile_text = "\n\n".join(section(c) for c in volatile)
    plan = ContextPlan(
        system_chars=len(system),
        volatile_chars=len(volatile_text),
        channels=[ChannelUse(name=c.name, stable=c.stable, chars=len(c.text)) for c in channels],
    )
    return system, volatile_text, plan


def compose_messages(transcript: Sequence[Message], volatile_text: str) -> tuple[list[Message], int | None]:
    """The request's messages and the index of the last cacheable one (the transcript's end)."""
    messages = list(transcript)
    breakpoint_index = len(messages) - 1 if messages else None
    if volatile_text:
        messages.append(Message(role="user", content=[TextBlock(text=volatile_text)], origin="system"))
    return messages, breakpoint_index
