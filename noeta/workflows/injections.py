"""Injected context (the ``inject`` signal): bounded while it waits, entering between steps."""

from __future__ import annotations

from noeta.protocols.messages import Message, TextBlock
from noeta.protocols.task import MAX_INJECTED_CHARS_PER_STEP, MAX_QUEUED_INJECTION_BYTES, InjectInput


def queue_injection(queue: list[InjectInput], message: InjectInput) -> None:
    """A signal cannot be refused: past MAX_QUEUED_INJECTION_BYTES waiting, its text is replaced by
    a short note."""
    queued = sum(len(i.text.encode()) for i in queue)
    if queued + len(message.text.encode()) > MAX_QUEUED_INJECTION_BYTES:
        message = InjectInput(
            f"[{len(message.text)} characters of injected context dropped: too much was waiting]",
            message.origin,
        )
    queue.append(message)


def take_injections(queue: list[InjectInput]) -> list[Message]:
    """The messages that enter the transcript at this step, at most MAX_INJECTED_CHARS_PER_STEP
    (the rest waits for the next steps); taken off ``queue``."""
    messages: list[Message] = []
    budget = MAX_INJECTED_CHARS_PER_STEP
    while queue and (not messages or len(queue[0].text) <= budget):
        injection = queue.pop(0)
        text = injection.text
        if len(text) > budget:
            text = text[:budget] + " [truncated]"
        budget -= len(text)
        messages.append(Message(role="user", content=[TextBlock(text=text)], origin=injection.origin))
    return messages
