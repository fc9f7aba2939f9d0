"""A model call's provider request, built from what the workflow recorded for it: the one place
that turns a :class:`CallModelInput` (with the transcript and the stored bodies it points at, read
by the caller) into an :class:`LLMRequest`. The worker's ``call_model`` builds each call's request
here, and a replay rebuilds a recorded turn's request here, so the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from noeta.context.composer import compose_messages
from noeta.protocols.activity_io import CallModelInput
from noeta.protocols.messages import LLMRequest, Message
from noeta.protocols.tool import ToolSpec


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
    references ``inp`` names, ``tools`` the shapes it offers."""
    messages, cache_breakpoint = compose_messages(transcript, volatile)
    metadata: dict[str, Any] = {"task_id": inp.task_id, "turn": inp.turn}
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
