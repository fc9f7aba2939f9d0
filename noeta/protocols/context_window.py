"""How big a model request is, and how big it may be: each model's context window and a
deterministic token count of messages.

Pure and sandbox-safe: the workflow counts the request it is about to send with these functions
(the last call's reported usage plus :func:`estimate_tokens` of what was added since) and the
worker counts what a compaction folds with the same ones, so both agree on every replay.

No tokenizer is used: the providers' tokenizers are not all public, the ones that are would have to
be loaded inside the workflow sandbox, and a count that is only used to decide *when* to compact
needs to be close and cautious, not exact. The estimate is ``CHARS_PER_TOKEN`` characters per
token plus a small overhead per message and block; docs/long-running.md gives its measured error
against the local default model's own tokenizer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

from noeta.protocols.messages import (
    ContentRef,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

#: Characters per token of the estimate. English prose and code run at 3.5-4.5 characters per
#: token on current tokenizers; JSON and identifiers at fewer. 3.5 errs on the side of counting
#: too many, so a compaction comes a little early rather than a request too large.
CHARS_PER_TOKEN = 3.5
#: Tokens a message costs beyond its text (role markers, separators of the chat template).
MESSAGE_OVERHEAD_TOKENS = 4
#: Tokens a content block costs beyond its text (tool-call ids, names, JSON framing).
BLOCK_OVERHEAD_TOKENS = 8
#: What an image is counted as (providers charge ~1,000-1,600 tokens for a typical picture).
IMAGE_TOKENS = 1600

#: Context windows in tokens by model-name prefix, longest prefix first wins. The providers'
#: current models; ``Options.context_window_tokens`` overrides (a model not listed has no window,
#: so it is compacted only when the provider says the request is too long).
WINDOWS: dict[str, int] = {
    # Anthropic
    "claude-opus-4": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4": 200_000,
    "claude-3-7-sonnet": 200_000,
    "claude-3-5-sonnet": 200_000,
    "claude-3-5-haiku": 200_000,
    "claude-3-opus": 200_000,
    "claude-3-haiku": 200_000,
    "claude-": 200_000,
    # OpenAI
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    # The local default (noeta.providers.local): llama.cpp runs SmolLM2 with a 4,096-token context.
    "SmolLM2-135M-Instruct": 4_096,
    "needle+SmolLM2-135M-Instruct": 4_096,
}


def context_window(model: str | None, override: int | None = None) -> int | None:
    """The context window of ``model`` in tokens: ``override`` when set, else the longest prefix of
    :data:`WINDOWS` that ``model`` starts with, else None (not known)."""
    if override is not None:
        return override
    if not model:
        return None
    name = model.rsplit("/", 1)[-1]  # "openai/gpt-4o" (routers) counts as "gpt-4o"
    best = max((prefix for prefix in WINDOWS if name.startswith(prefix)), key=len, default=None)
    return WINDOWS[best] if best is not None else None


def tokens_of_chars(chars: int) -> int:
    """The estimated tokens of ``chars`` characters of text."""
    return math.ceil(chars / CHARS_PER_TOKEN) if chars > 0 else 0


def _block_chars(block: object) -> tuple[int, int]:
    """(characters, extra tokens) of one content block."""
    if isinstance(block, TextBlock):
        return len(block.text), 0
    if isinstance(block, ToolUseBlock):
        arguments = json.dumps(block.arguments, ensure_ascii=False, separators=(",", ":"), default=str)
        return len(block.tool_name) + len(arguments), 0
    if isinstance(block, ToolResultBlock):
        output = block.output
        chars = output.size if isinstance(output, ContentRef) else len(output or "")
        return chars + len(block.error or ""), IMAGE_TOKENS * len(block.images or ())
    if isinstance(block, ThinkingBlock):
        return len(block.thinking) + len(block.redacted or ""), 0
    if isinstance(block, ImageBlock):
        return 0, IMAGE_TOKENS
    return 0, 0


def estimate_message_tokens(message: Message) -> int:
    """The estimated tokens of one message as a provider receives it (a stored tool output counts
    by its stored size: its body is not read)."""
    total = MESSAGE_OVERHEAD_TOKENS
    for block in message.content:
        chars, extra = _block_chars(block)
        total += BLOCK_OVERHEAD_TOKENS + tokens_of_chars(chars) + extra
    return total


def estimate_tokens(messages: Iterable[Message]) -> int:
    """The estimated tokens of ``messages``."""
    return sum(estimate_message_tokens(m) for m in messages)


__all__ = [
    "BLOCK_OVERHEAD_TOKENS",
    "CHARS_PER_TOKEN",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "WINDOWS",
    "context_window",
    "estimate_message_tokens",
    "estimate_tokens",
    "tokens_of_chars",
]
