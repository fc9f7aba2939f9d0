"""Message content on model-call spans: off unless the operator opts in with the variable the
OpenTelemetry GenAI instrumentations share, ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``
(prompts and answers often hold personal data, and they make spans large). Captured content is
scrubbed of secrets and cut to :data:`MAX_CHARS` per attribute.

The attributes are ``gen_ai.input.messages`` and ``gen_ai.output.messages``: JSON arrays of
``{"role", "parts": [{"type": "text", "content"} | {"type": "tool_call", "id", "name",
"arguments"} | {"type": "tool_call_response", "id", "response"}]}`` as the GenAI conventions
describe them; images and stored bodies are named, not included.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from noeta.protocols.messages import ContentRef, ImageBlock, Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from noeta.security.scrub import scrub
from noeta.telemetry.settings import OtelSettings

#: Characters kept of each captured attribute (a span's attribute is exported whole).
MAX_CHARS = 64 * 1024
_capture: bool | None = None


def capture_message_content() -> bool:
    """Whether the operator asked for message content on spans (read once per process)."""
    global _capture
    if _capture is None:
        _capture = OtelSettings.from_env().otel_instrumentation_genai_capture_message_content
    return _capture


def _part(block: Any) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "content": block.text}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_call", "id": block.call_id, "name": block.tool_name, "arguments": block.arguments}
    if isinstance(block, ToolResultBlock):
        output = block.output
        shown = f"[stored body {output.hash}]" if isinstance(output, ContentRef) else output
        return {"type": "tool_call_response", "id": block.call_id, "response": shown if block.success else block.error}
    if isinstance(block, ThinkingBlock):
        return {"type": "reasoning", "content": block.thinking}
    if isinstance(block, ImageBlock):
        return {"type": "image", "content": f"[image {block.source.hash}]"}
    return {"type": getattr(block, "type", "other")}


def content_json(messages: Sequence[Message], system: str | None = None) -> str:
    """``messages`` (and the system prompt first, when given) as the GenAI conventions' JSON,
    scrubbed and cut to :data:`MAX_CHARS`."""
    entries: list[dict[str, Any]] = []
    if system:
        entries.append({"role": "system", "parts": [{"type": "text", "content": system}]})
    entries += [{"role": m.role, "parts": [_part(b) for b in m.content]} for m in messages]
    return scrub(json.dumps(entries, ensure_ascii=False, default=str))[:MAX_CHARS]


__all__ = ["MAX_CHARS", "capture_message_content", "content_json"]
