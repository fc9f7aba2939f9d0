"""Content channels: named kinds of context that the composer places in a request."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ContentKindSpec:
    """Declares a kind of content that can enter the model's context (``Options.content_channels``;
    the content itself goes in ``Options.context[name]``).

    ``stable`` content (policies, reference docs, long-lived knowledge) joins the system prompt, the
    cacheable prefix that stays byte-identical from one model call to the next. Volatile content
    (today's date, a queue's state) is sent after the transcript, outside the cache, so it never
    invalidates the cached conversation.
    """

    name: str
    stable: bool = False
    max_chars: int | None = None
    """A larger ``context[name]`` is refused when the task starts (ConfigurationError)."""
    description: str = ""
