"""How big a model request is, and how big it may be: each model's context window and a
deterministic token count of messages.

Pure and sandbox-safe: the workflow counts the request it is about to send with these functions
(the last call's reported usage plus :func:`estimate_tokens` of what was added since) and the
worker counts what a compaction folds with the same ones, so both agree on every replay.

No tokenizer is used: the providers' tokenizers are not all public, the ones that are would have to
be loaded inside the workflow sandbox (and its vocabulary carried by every worker), and a count
that is only used to decide *when* to compact needs to be close and cautious, not exact. The
estimate counts a text by the kinds of its characters (:func:`text_tokens`) plus a small overhead
per message and block; bench/token_count.py measures it against the local default model's own
tokenizer (docs/long-running.md gives the figures).

The estimate and the window table are part of the workflow's decisions (when to compact): a task
replays with the counts it ran with, so changing a constant or a window here changes the commands
of running tasks (tests/histories/compaction replays one). Change them behind a new patch id.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator

from noeta.protocols.messages import (
    ContentRef,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

#: Characters per token of a body that is not read (a stored tool output counted by its size).
CHARS_PER_TOKEN = 3.5
#: Letters of a word per token: a word of up to 8 ASCII letters is one token, longer ones more.
WORD_LETTERS_PER_TOKEN = 8
#: A punctuation mark, symbol or non-ASCII character: most are a token, some merge with a neighbour.
SYMBOL_TOKENS = 0.8
#: Tokens a message costs beyond its text (role markers, separators of the chat template).
MESSAGE_OVERHEAD_TOKENS = 5
#: Tokens a content block costs beyond its text (tool-call ids, names, JSON framing).
BLOCK_OVERHEAD_TOKENS = 4
#: What an image is counted as (providers charge ~1,000-1,600 tokens for a typical picture).
IMAGE_TOKENS = 1600
#: The pieces a text is counted by: ASCII words, single digits, whitespace runs, anything else.
_PIECES = re.compile(r"[A-Za-z]+|\d|\s+|[^\sA-Za-z\d]")

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
    """The estimated tokens of ``chars`` characters of text that is not read (a stored body)."""
    return math.ceil(chars / CHARS_PER_TOKEN) if chars > 0 else 0


def text_pieces(text: str) -> Iterator[tuple[str, float]]:
    """The pieces :func:`text_tokens` counts ``text`` by, in order, each with its estimated tokens
    (the cap on tool output cuts a text at these)."""
    for match in _PIECES.finditer(text):
        piece = match.group()
        first = piece[0]
        if first.isascii() and first.isalpha():
            yield piece, -(-len(piece) // WORD_LETTERS_PER_TOKEN)
        elif first.isdigit():
            yield piece, 1
        elif first.isspace():
            yield piece, 1 if len(piece) > 1 or "\n" in piece else 0
        else:
            yield piece, SYMBOL_TOKENS


def text_tokens(text: str) -> int:
    """The estimated tokens of ``text``, by the kind of its characters: a word is a token per 8
    letters, a digit a token (tokenizers of the Llama family split numbers into digits), a run of
    whitespace a token when it holds a line break or more than one character, any other character
    0.8 of a token. At most one token per character."""
    total = 0.0
    for _, tokens in text_pieces(text):
        total += tokens
    return math.ceil(total)


def _block_tokens(block: object) -> int:
    """The estimated tokens of one content block's own text."""
    if isinstance(block, TextBlock):
        return text_tokens(block.text)
    if isinstance(block, ToolUseBlock):
        arguments = json.dumps(block.arguments, ensure_ascii=False, separators=(",", ":"), default=str)
        return text_tokens(block.tool_name) + text_tokens(arguments)
    if isinstance(block, ToolResultBlock):
        output = block.output
        counted = tokens_of_chars(output.size) if isinstance(output, ContentRef) else text_tokens(output or "")
        return counted + text_tokens(block.error or "") + IMAGE_TOKENS * len(block.images or ())
    if isinstance(block, ThinkingBlock):
        return text_tokens(block.thinking) + tokens_of_chars(len(block.redacted or ""))
    if isinstance(block, ImageBlock):
        return IMAGE_TOKENS
    return 0


def estimate_message_tokens(message: Message) -> int:
    """The estimated tokens of one message as a provider receives it (a stored tool output counts
    by its stored size: its body is not read)."""
    return MESSAGE_OVERHEAD_TOKENS + sum(BLOCK_OVERHEAD_TOKENS + _block_tokens(b) for b in message.content)


def estimate_tokens(messages: Iterable[Message]) -> int:
    """The estimated tokens of ``messages``."""
    return sum(estimate_message_tokens(m) for m in messages)


__all__ = [
    "BLOCK_OVERHEAD_TOKENS",
    "CHARS_PER_TOKEN",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "SYMBOL_TOKENS",
    "WINDOWS",
    "WORD_LETTERS_PER_TOKEN",
    "context_window",
    "text_pieces",
    "estimate_message_tokens",
    "estimate_tokens",
    "text_tokens",
    "tokens_of_chars",
]
