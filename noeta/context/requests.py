"""A model call's provider request, built from what the workflow recorded for it: the one place
that turns a :class:`CallModelInput` (with the transcript and the stored bodies it points at, read
by the caller) into an :class:`LLMRequest`. The worker's ``call_model`` builds each call's request
here, and a replay rebuilds a recorded turn's request here, so the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from noeta.context.composer import compose_messages
from noeta.protocols.activity_io import CallModelInput
from noeta.protocols.messages import Block, LLMRequest, Message, ToolResultBlock
from noeta.protocols.tool import ToolSpec
from noeta.protocols.tool_output_cap import capped_tool_output


def tool_schema(spec: ToolSpec) -> dict[str, Any]:
    """The provider-neutral tool shape put in ``LLMRequest.tools``."""
    return {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema}


def offered_tools(
    names: Sequence[str], own: Callable[[str], ToolSpec | None], remote: Mapping[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The shapes of the tools ``names`` offers, in order: a worker's own tool by its spec
    (``own`` answers None for a name that is not one), else a remote one (MCP tools, sub-agents) as
    stored; names with neither are left out."""
    shapes = []
    for name in names:
        spec = own(name)
        if spec is not None:
            shapes.append(tool_schema(spec))
        elif name in remote:
            shapes.append(remote[name])
    return shapes


def capped_results(transcript: Sequence[Message], max_tokens: int | None) -> Sequence[Message]:
    """``transcript`` with each tool result's text (its output, a failed one's error) cut to
    ``max_tokens`` (noeta.protocols.tool_output_cap); messages with nothing to cut are the same
    objects, and with no cap the transcript is returned as it is."""
    if max_tokens is None:
        return transcript
    out = []
    for message in transcript:
        content: list[Block] = []
        changed = False
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                output = capped_tool_output(block.output, max_tokens) if isinstance(block.output, str) else block.output
                error = capped_tool_output(block.error, max_tokens) if block.error is not None else None
                if output is not block.output or error is not block.error:
                    block = ToolResultBlock(block.call_id, output, block.success, error=error, images=block.images)
                    changed = True
            content.append(block)
        out.append(Message(role=message.role, content=content, origin=message.origin) if changed else message)
    return out


def model_request(
    inp: CallModelInput,
    transcript: Sequence[Message],
    *,
    tools: list[dict[str, Any]],
    system: str | None,
    volatile: str,
    output_schema: dict[str, Any] | None,
    timeout_seconds: float | None = None,
) -> LLMRequest:
    """The request for ``inp``: ``transcript`` is the stored transcript plus ``inp.append`` with
    every stored body resolved, ``system``, ``volatile`` and ``output_schema`` the bodies of the
    references ``inp`` names, ``tools`` the shapes it offers. Tool results are capped at
    ``inp.max_tool_output_tokens`` (the transcript keeps them whole)."""
    messages, cache_breakpoint = compose_messages(capped_results(transcript, inp.max_tool_output_tokens), volatile)
    metadata: dict[str, Any] = {"task_id": inp.task_id, "turn": inp.turn}
    if inp.sampling is not None:  # an MCP server's request, with its own system prompt
        system = inp.sampling.system_prompt
        metadata["mcp_sampling"] = inp.sampling.call_id
    if cache_breakpoint is not None:
        metadata["cache_breakpoint_message"] = cache_breakpoint
    return LLMRequest(
        model=inp.model,
        messages=messages,
        tools=tools,
        system=system,
        temperature=inp.temperature,
        max_tokens=inp.max_tokens,
        metadata=metadata,
        output_schema=output_schema,
        thinking=inp.thinking,
        effort=inp.effort,
        timeout_seconds=timeout_seconds,
    )
