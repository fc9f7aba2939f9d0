"""How close the workflow's token count is to a real tokenizer's.

    python bench/token_count.py

Needs the [local] extra and the SmolLM2 weights. Each request below (prose, code, JSON, digits,
tool calls with their results, of a few hundred to ~3,000 tokens) is sent to the local default
model's llama.cpp server through the OpenAI adapter with ``max_tokens=1``; the server reports the
prompt's tokens as its tokenizer counted them, chat template included. The estimate is what the
workflow counts for the same messages and system prompt (noeta.protocols.context_window).
Prints one line per request and the error's mean, median and range; the figures go to
bench/RESULTS.md and docs/long-running.md.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from noeta.protocols.context_window import estimate_tokens, text_tokens  # noqa: E402
from noeta.protocols.messages import LLMRequest, Message, TextBlock, ToolResultBlock, ToolUseBlock  # noqa: E402
from noeta.providers.local_text import MODEL_ALIAS, ensure_server, stop  # noqa: E402
from noeta.providers.openai import OpenAIProvider  # noqa: E402

PROSE = (
    "The committee met on Tuesday to review the quarterly figures. Revenue rose by four percent, "
    "driven mostly by the new subscription tier, while costs stayed flat. Two open questions remain: "
    "whether to expand the support team before the holidays, and how to price the annual plan. "
)
CODE = (
    "def merge(a: list[int], b: list[int]) -> list[int]:\n    out, i, j = [], 0, 0\n"
    "    while i < len(a) and j < len(b):\n        if a[i] <= b[j]:\n            out.append(a[i]); i += 1\n"
    "        else:\n            out.append(b[j]); j += 1\n    return out + a[i:] + b[j:]\n"
)
RECORD = {"id": 4711, "name": "Ada Lovelace", "email": "ada@example.org", "tags": ["math", "engines"], "active": True}


def digits(i: int, chars: int = 2048) -> str:
    """The test suite's 2 KB tool output (tests/support/windowed.py)."""
    return (f"chunk {i}: " + f"{i:06d} " * (chars // 7 + 1))[:chars]


def tool_turns(n: int, output: str) -> list[Message]:
    messages = [Message("user", [TextBlock("Fetch the chunks one by one.")])]
    for i in range(1, n + 1):
        messages.append(Message("assistant", [ToolUseBlock(f"call_{i}", "fetch", {"i": i})]))
        messages.append(Message("tool", [ToolResultBlock(f"call_{i}", output.replace("{i}", str(i)), True)]))
    return messages


CASES: dict[str, list[Message]] = {
    "prose x4": [Message("user", [TextBlock(PROSE * 4)])],
    "prose x20": [Message("user", [TextBlock(PROSE * 20)])],
    "code x6": [Message("user", [TextBlock(CODE * 6)])],
    "json x12": [Message("user", [TextBlock(json.dumps([RECORD] * 12))])],
    "chat 10 turns": [
        Message("user" if i % 2 == 0 else "assistant", [TextBlock(PROSE[: 60 + 7 * i])]) for i in range(10)
    ],
    "1 tool turn, 2 KB digits": tool_turns(1, digits(7)),
    "5 tool turns, prose results": tool_turns(5, PROSE * 3),
    "4 tool turns, JSON results": tool_turns(4, json.dumps([RECORD] * 4)),
}
SYSTEM = "You are a careful assistant."


async def main() -> None:
    base = await asyncio.to_thread(ensure_server)
    provider = OpenAIProvider(base_url=f"{base}/v1", api_key="", model=MODEL_ALIAS, name="local")
    errors = []
    print(f"{'request':<28} {'llama.cpp':>9} {'estimate':>9} {'error':>7}")
    try:
        for name, messages in CASES.items():
            response = await provider.complete(LLMRequest(model=None, system=SYSTEM, messages=messages, max_tokens=1))
            real = response.usage.input
            estimate = estimate_tokens(messages) + text_tokens(SYSTEM)
            error = (estimate - real) / real
            errors.append(error)
            print(f"{name:<28} {real:>9} {estimate:>9} {error:>+7.1%}")
    finally:
        await provider.aclose()
        stop()
    print(
        f"error: mean {statistics.mean(errors):+.1%}, median {statistics.median(errors):+.1%}, "
        f"from {min(errors):+.1%} to {max(errors):+.1%} (positive: the estimate counts more)"
    )


if __name__ == "__main__":
    asyncio.run(main())
