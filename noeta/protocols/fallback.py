"""Provider fallback (``Options.fallback_providers``): the providers a task may move to, which
failures move it, and what it spent on each provider.

The decision is one function, :func:`falls_back`, read by the workflow that switches
(noeta.workflows.fallback). Each switch is recorded in the task's memo under
PROVIDER_FALLBACK_MEMO_KEY as the ``ProviderFallback`` event itself (noeta.protocols.events_calls),
which the projection reads back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from noeta.errors import AttemptsExhaustedError, ContextLengthError, ProviderError, ProviderNotRegisteredError
from noeta.protocols.messages import Usage

#: HTTP statuses of a provider's final answer that another provider may not share: the key is
#: refused (401) or lacks the permission (403), the model or endpoint does not exist there (404),
#: the service is overloaded (529, Anthropic's) or down (5xx, 408, 429: normally retried until the
#: attempts run out, which also falls back). Not 400, 413 or 422: a malformed request is refused by
#: the next provider as well (a request too long is a ContextLengthError, decided apart).
FALLBACK_STATUSES = frozenset({401, 403, 404, 408, 409, 429, 529}) | frozenset(range(500, 600))

#: Error types (an ApplicationError's ``type``) that let a call move to the next provider whatever
#: their details: every attempt failed (AttemptsExhaustedError; a content store that failed them
#: ends the call with ContentStoreError instead, which does not move),
#: the worker lacks the provider (ProviderNotRegisteredError), and the request is longer than the
#: model's window (ContextLengthError: after compaction had its try; the next provider with a
#: larger window is taken).
FALLBACK_ERROR_TYPES = frozenset(
    cls.__name__ for cls in (AttemptsExhaustedError, ProviderNotRegisteredError, ContextLengthError)
)


@dataclass(frozen=True, slots=True)
class ProviderChoice:
    """A provider a task may fall back to, as its input carries it: the registry name of a worker's
    provider and the model to ask there (None: that provider's default)."""

    provider: str
    model: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderUsage:
    """What a task's own model calls spent on one provider and model (sub-agents report theirs in
    their own results)."""

    provider: str
    model: str | None
    """The model as the task asked for it (None: the provider's default)."""
    usage: Usage
    """Tokens and cost of those calls."""
    model_calls: int
    """Model calls that this provider answered."""


def current_choice(provider: str, model: str | None, fallbacks: list[ProviderChoice], index: int) -> ProviderChoice:
    """The provider and model a task's calls go to: its own (``provider``, ``model``) at ``index`` 0,
    else the ``index``-th of its ``fallbacks`` (a Carry's ``provider_index``)."""
    if index == 0 or index > len(fallbacks):
        return ProviderChoice(provider, model)
    return fallbacks[index - 1]


def falls_back(error_type: str | None, details: Any) -> bool:
    """Whether a model call that failed with ``error_type`` (its ApplicationError's type) and
    ``details`` (its first detail) may be made again on the next provider."""
    if error_type in FALLBACK_ERROR_TYPES:
        return True
    if error_type == ProviderError.__name__ and isinstance(details, Mapping):
        status = details.get("status")
        return isinstance(status, int) and status in FALLBACK_STATUSES
    return False


def add_usage(
    spent: list[ProviderUsage], provider: str, model: str | None, usage: Usage
) -> list[ProviderUsage]:
    """``spent`` with one more call of ``provider``/``model`` that used ``usage`` (a new list)."""
    out, found = [], False
    for entry in spent:
        if entry.provider == provider and entry.model == model:
            entry = ProviderUsage(provider, model, entry.usage + usage, entry.model_calls + 1)
            found = True
        out.append(entry)
    return out if found else [*out, ProviderUsage(provider, model, usage, 1)]


__all__ = [
    "FALLBACK_ERROR_TYPES", "FALLBACK_STATUSES", "ProviderChoice", "ProviderUsage",
    "add_usage", "current_choice", "falls_back",
]
