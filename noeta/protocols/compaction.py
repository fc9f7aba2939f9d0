"""``Options.compaction``: when and how a task's context is made smaller before a model call would
cross its window (docs/long-running.md).

The workflow decides *when* (:func:`compaction_due`, from its token count and the window); the
worker carries out *how* (``noeta.compact_context``), with one of three strategies:

- ``"summarize"``: the oldest turns are folded into a summary written by the task's own model (a
  recorded activity); the summary enters what the model sees as an injected message (origin
  "system") after the stable prefix (system prompt, tool definitions, the first goal);
- ``"previews"``: old tool outputs are replaced by a short preview and their content reference
  (and, if that is not enough, the oldest turns are left out, with a note);
- ``"function"``: a worker-registered pure function over the messages the model sees
  (``Registry.add_compactor``), named by ``function``.

The full transcript is never changed: it stays in the content store and in ``messages()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CompactionStrategy = Literal["summarize", "previews", "function", "off"]
STRATEGIES: tuple[str, ...] = ("summarize", "previews", "function", "off")

#: What starts the injected summary message (the model reads it; the projection recognises it).
SUMMARY_HEADER = "[Summary of the conversation so far, written when the context was compacted]\n"
#: The instruction of a summarizing call.
SUMMARY_INSTRUCTION = (
    "You compact an agent's conversation so it can go on within its context window. Write a "
    "concise summary of the conversation below: the goals, what was done (tool calls and what "
    "they returned that still matters: numbers, names, file paths, decisions), what is left to "
    "do. Keep facts exact; leave out pleasantries. Answer with the summary only."
)
#: The last message of a summarizing call sent on the task's own prefix (system prompt, tools and
#: the folded turns as the task's requests send them), so the provider's prefix cache serves it.
SUMMARY_REQUEST = (
    "[The conversation above is about to be compacted so the task can go on within its context "
    "window.] Do not call a tool and do not go on with the task now. Write a concise summary of "
    "the conversation above: the goals, what was done (tool calls and what they returned that "
    "still matters: numbers, names, file paths, decisions), what is left to do. Keep facts exact; "
    "leave out pleasantries. Answer with the summary only."
)


@dataclass(frozen=True, slots=True)
class Compaction:
    """When and how a task's context is compacted. On by default; ``Options(compaction=None)``
    turns it off, as does ``Compaction(strategy="off")`` (a request too long for the window then
    fails the task with ContextLengthError, as before)."""

    strategy: CompactionStrategy = "summarize"
    """``"summarize"``, ``"previews"`` or ``"function"`` (see the module); ``"off"``: never compact
    (as ``Options(compaction=None)``; the way to say it in a JSON body)."""
    threshold: float = 0.8
    """Compact before a call whose counted request would pass this fraction of the window."""
    keep_recent: float = 0.3
    """The newest turns kept word for word: up to this fraction of the window."""
    function: str | None = None
    """The registered compactor of strategy ``"function"`` (``Registry.add_compactor``)."""
    summary_max_tokens: int = 1024
    """Most output tokens of a summarizing call."""
    preview_chars: int = 200
    """Characters of an old tool output that strategy ``"previews"`` keeps."""

    def problem(self) -> str | None:
        """What is wrong with these settings, or None."""
        if self.strategy not in STRATEGIES:
            return f"compaction.strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}"
        if not 0.1 <= self.threshold <= 1.0:
            return f"compaction.threshold must be a number from 0.1 to 1, got {self.threshold!r}"
        if not 0.0 <= self.keep_recent < self.threshold:
            return f"compaction.keep_recent must be from 0 to below the threshold, got {self.keep_recent!r}"
        if self.strategy == "function" and not self.function:
            return "compaction.strategy 'function' needs compaction.function, a registered compactor's name"
        if not 16 <= self.summary_max_tokens <= 100_000:
            return f"compaction.summary_max_tokens must be from 16 to 100000, got {self.summary_max_tokens!r}"
        if not 0 <= self.preview_chars <= 100_000:
            return f"compaction.preview_chars must be from 0 to 100000, got {self.preview_chars!r}"
        return None


def compaction_due(tokens: int, window: int | None, compaction: Compaction | None) -> bool:
    """Whether a request of ``tokens`` counted tokens must be compacted first: it would pass the
    threshold of a known ``window``."""
    if compaction is None or not active(compaction) or window is None:
        return False
    return tokens > compaction.threshold * window


def active(compaction: Compaction | None) -> bool:
    """Whether ``compaction`` compacts at all (set, and its strategy is not ``"off"``)."""
    return compaction is not None and compaction.strategy != "off"


__all__ = [
    "STRATEGIES",
    "SUMMARY_HEADER",
    "SUMMARY_INSTRUCTION",
    "SUMMARY_REQUEST",
    "Compaction",
    "CompactionStrategy",
    "active",
    "compaction_due",
]
