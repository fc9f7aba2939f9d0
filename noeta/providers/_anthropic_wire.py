"""The Messages API's wire shapes for the Anthropic adapter: the transcript as alternating turns
(tool results in user turns, images, thinking blocks, a cache breakpoint), usage, and the HTTP
status an in-band ``error`` stands for."""

from __future__ import annotations

from typing import Any

from noeta.protocols.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from noeta.providers._shapes import (
    count,
    tool_result_text,
)

CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}

# The HTTP status each error type of an in-stream ``error`` event stands for.
_ERROR_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def error_status(data: dict[str, Any]) -> int:
    """The HTTP status an ``error`` object inside a 200 (body or stream event) stands for."""
    error = data.get("error")
    kind = error.get("type") if isinstance(error, dict) else None
    return _ERROR_STATUS.get(kind if isinstance(kind, str) else "", 500)


def wire_messages(messages: list[Message], breakpoint: Any = None) -> list[dict[str, Any]]:
    """The transcript as Messages API turns: alternating roles, tool results in user turns."""
    out: list[dict[str, Any]] = []
    # For each transcript message, where its last block went: (turn index, block index).
    last_block: list[tuple[int, int] | None] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": list(blocks)})

    for message in messages:
        results = [
            _tool_result(b) for b in message.content if isinstance(b, ToolResultBlock)
        ]
        add("user", results)  # results answer the previous assistant turn: they go first
        blocks: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextBlock) and block.text:
                blocks.append({"type": "text", "text": block.text})
            elif isinstance(block, ToolUseBlock) and message.role == "assistant":
                blocks.append(
                    {"type": "tool_use", "id": block.call_id, "name": block.tool_name, "input": block.arguments}
                )
            elif isinstance(block, ImageBlock) and block.data and message.role != "assistant":
                blocks.append(_image(block))
            elif isinstance(block, ThinkingBlock) and message.role == "assistant":
                if block.redacted:
                    blocks.append({"type": "redacted_thinking", "data": block.redacted})
                elif block.signature:
                    blocks.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
        add("assistant" if message.role == "assistant" else "user", blocks)
        last_block.append((len(out) - 1, len(out[-1]["content"]) - 1) if (results or blocks) else None)

    where = (
        last_block[breakpoint]
        if isinstance(breakpoint, int)
        and not isinstance(breakpoint, bool)
        and -len(messages) <= breakpoint < len(messages)
        else None
    )
    if where is not None:
        turn, index = where
        content = out[turn]["content"]
        content[index] = {**content[index], "cache_control": dict(CACHE_CONTROL)}
    return out


def _image(block: ImageBlock) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": block.source.media_type, "data": block.data}}


def _tool_result(result: ToolResultBlock) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call_id}
    text = tool_result_text(result)
    if not text and not result.success:
        text = "error"  # the API rejects an empty error result
    images = [_image(i) for i in result.images or () if i.data]
    if images:
        block["content"] = ([{"type": "text", "text": text}] if text else []) + images
    elif text:
        block["content"] = text
    block["is_error"] = not result.success
    return block


def usage_of(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    details = raw.get("output_tokens_details")
    return Usage(
        uncached=count(raw.get("input_tokens")),
        cache_read=count(raw.get("cache_read_input_tokens")),
        cache_write=count(raw.get("cache_creation_input_tokens")),
        output=count(raw.get("output_tokens")),
        reasoning_tokens=count(details.get("thinking_tokens")) if isinstance(details, dict) else 0,
    )
