"""What a provider's context-length refusal says about the request's size and the model's window.

Providers word it differently; each form seen in the wild is one pattern here:

- Anthropic: ``prompt is too long: 210371 tokens > 200000 maximum``;
- OpenAI and vLLM: ``This model's maximum context length is 8192 tokens. However, your messages
  resulted in 9013 tokens`` (or ``you requested 9013 tokens (8013 in the messages, ...)``);
- llama.cpp: a JSON body with ``n_prompt_tokens`` and ``n_ctx``.

A form not listed gives None for what it does not say: the workflow then counts the request itself.
"""

from __future__ import annotations

import re

_REQUESTED = (
    re.compile(r"too long:\s*(\d+)\s*tokens"),
    re.compile(r"(?:resulted in|you requested|requested)\s+(\d+)\s+tokens"),
    re.compile(r"n_prompt_tokens\W+(\d+)"),
)
_LIMIT = (
    re.compile(r"tokens\s*>\s*(\d+)"),
    re.compile(r"maximum context length is\s+(\d+)"),
    re.compile(r"n_ctx\W+(\d+)"),
)


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return int(found.group(1))
    return None


def refused_sizes(message: str) -> tuple[int | None, int | None]:
    """(the refused request's tokens, the model's window) as ``message`` states them (None: not said)."""
    return _first(_REQUESTED, message), _first(_LIMIT, message)
