"""Builders for scripted model responses."""

from __future__ import annotations

from typing import Any

from noeta.protocols.messages import LLMResponse, TextBlock, ToolUseBlock, Usage


def say(text: str, output_tokens: int = 5) -> LLMResponse:
    return LLMResponse(
        stop_reason="end_turn", content=[TextBlock(text=text)], usage=Usage(uncached=10, output=output_tokens)
    )


def call(*calls: tuple[str, str, dict[str, Any]], text: str = "") -> LLMResponse:
    """A tool_use response; each call is (call_id, tool_name, arguments)."""
    blocks: list[Any] = [TextBlock(text=text)] if text else []
    blocks += [ToolUseBlock(call_id=c, tool_name=n, arguments=a) for c, n, a in calls]
    return LLMResponse(stop_reason="tool_use", content=blocks, usage=Usage(uncached=10, output=3))
