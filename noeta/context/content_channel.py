"""Content channels: named kinds of context that the composer places in a request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class ContentKindSpec:
    """Declares a kind of content that can enter the model's context.

    ``stable`` content belongs to the cacheable prefix (system prompt, tool docs, long-lived
    knowledge); volatile content goes after the cache boundary.
    """

    name: str
    stable: bool = False
    role: Literal["system", "user"] = "system"
    max_chars: int | None = None
    description: str = ""
