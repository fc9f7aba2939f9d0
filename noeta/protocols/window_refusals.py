"""What a context-length refusal teaches a task about its model's window (DESIGN §10: every
decision about the context is the workflow's, from recorded facts).

A refused request is a fact in history: its ContextLengthError's details carry the size the
provider refused and, when the provider said it, the model's window (noeta.errors._refused_sizes).
From them the workflow decides, deterministically, the window it plans with from then on for the
provider and model that refused (``Carry.learned_windows``, carried across continue-as-new): the
stated window, else the refused size itself (the window is below it). A configured or catalogued
window that is too large is so corrected once, and the next compaction comes by the threshold,
before the provider refuses again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def window_key(provider: str, model: str | None) -> str:
    """The key a learned window is kept under: the provider and the model that refused."""
    return f"{provider}/{model or ''}"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request the provider refused as too long for the model's window."""

    size: int
    """The refused request's tokens: the provider's count when it gave one, else the workflow's."""
    limit: int | None
    """The window the provider stated (None: not stated)."""

    @classmethod
    def of(cls, details: Any, counted: int) -> Refusal:
        """The refusal a ContextLengthError's recorded ``details`` describe; ``counted``: the
        workflow's count of the request, for a provider that did not say its size."""
        fields: Mapping[str, Any] = details if isinstance(details, Mapping) else {}
        requested, limit = fields.get("requested_tokens"), fields.get("limit_tokens")
        size = requested if isinstance(requested, int) and requested > 0 else counted
        return cls(size=size, limit=limit if isinstance(limit, int) and limit > 0 else None)

    def window(self, known: int | None) -> int:
        """The window to plan with after this refusal, ``known`` the one planned with before: the
        stated window, else the refused size, and never more than ``known``."""
        learned = self.limit if self.limit is not None else self.size
        return learned if known is None else min(known, learned)


__all__ = ["Refusal", "window_key"]
