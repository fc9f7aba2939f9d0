"""A scripted provider with a context window: it counts every request it receives and refuses one
over its window with ContextLengthError, as a real provider does. Each model turn asks for one
more ``fetch`` call (a tool returning ~2 KB) until ``turns`` calls were made, then answers.
``fetch_short`` returns the first 512 characters of the same chunks, for a real model that reads
every output (tests/test_compaction.py's local-model run).

The count is the provider's own (4 characters per token plus 4 tokens per message), not Noeta's
estimate, and it reports it as the call's usage, as real providers report theirs.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field

from noeta.errors import ContextLengthError
from noeta.protocols.messages import (
    ContentRef,
    LLMRequest,
    LLMResponse,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.tools import tool

CHUNK_CHARS = 2048
SHORT_CHUNK_CHARS = 512


WORDS = ("river", "stone", "ledger", "orbit", "cedar", "signal", "harbor", "copper", "meadow", "lantern", "quartz", "willow")


def chunk(i: int, chars: int = CHUNK_CHARS) -> str:
    """The output of ``fetch(i)``: 2 KB of words (``chars`` characters), different for each i."""
    words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(chars // 5))
    return f"chunk {i}: {words}"[:chars]


@tool(
    name="fetch",
    version="1",
    input_schema={"type": "object", "properties": {"i": {"type": "integer"}}, "required": ["i"]},
    description="Fetch chunk i (2 KB).",
)
def fetch(arguments: dict, ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output=chunk(int(arguments["i"])))


@tool(
    name="fetch_short",
    version="1",
    input_schema={"type": "object", "properties": {"i": {"type": "integer"}}, "required": ["i"]},
    description="Fetch the first 512 characters of chunk i.",
)
def fetch_short(arguments: dict, ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output=chunk(int(arguments["i"]), SHORT_CHUNK_CHARS))


def counted_tokens(request: LLMRequest) -> int:
    """The provider's count of a request: system, tools and every block, 4 characters a token."""
    chars = len(request.system or "") + len(json.dumps(request.tools))
    messages = 0
    for message in request.messages:
        messages += 1
        for block in message.content:
            if isinstance(block, TextBlock):
                chars += len(block.text)
            elif isinstance(block, ToolUseBlock):
                chars += len(block.tool_name) + len(json.dumps(block.arguments))
            elif isinstance(block, ToolResultBlock):
                output = block.output
                chars += output.size if isinstance(output, ContentRef) else len(output or "")
    return math.ceil(chars / 4) + 4 * messages


@dataclass
class WindowedProvider:
    """Scripted turns behind a context window of ``window`` counted tokens."""

    window: int = 8000
    turns: int = 300
    name: str = "windowed"
    largest: int = 0
    """The largest request it accepted (counted tokens)."""
    refused: list[int] = field(default_factory=list)
    """Counts of the requests it refused as too long."""
    summaries: list[str] = field(default_factory=list)
    """The step keys of the summarizing calls it answered, one per call."""
    calls: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def complete(self, request: LLMRequest) -> LLMResponse:
        tokens = counted_tokens(request)
        with self._lock:
            self.calls += 1
            if tokens > self.window:
                self.refused.append(tokens)
                raise ContextLengthError(
                    provider=self.name, message=f"prompt is too long: {tokens} tokens > {self.window}", status=400
                )
            self.largest = max(self.largest, tokens)
            if request.metadata.get("purpose") == "compaction":
                self.summaries.append(str(request.metadata.get("step_key")))
                text = f"Summary {len(self.summaries)}: fetched chunks so far; each was 2 KB of digits."
                return LLMResponse("end_turn", [TextBlock(text)], Usage(uncached=tokens, output=20))
        turn = int(request.metadata.get("turn", 0))
        usage = Usage(uncached=tokens, output=12)
        if turn <= self.turns:
            return LLMResponse("tool_use", [ToolUseBlock(f"f{turn}", "fetch", {"i": turn})], usage)
        return LLMResponse("end_turn", [TextBlock(f"fetched {self.turns} chunks")], usage)
