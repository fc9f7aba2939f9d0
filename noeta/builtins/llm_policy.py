"""The default policy: ask the model; run the tools it asks for; finish when it ends its turn.

A call of a declared sub-agent (``StepContext.subagents``) becomes a SpawnSubtask: the child runs as
a child task and its result answers the call. Tools of a turn run first, then its sub-agent calls,
one after the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from noeta.protocols.decisions import CallModel, CallTools, Decision, Finish, SpawnSubtask
from noeta.protocols.messages import ToolResultBlock
from noeta.protocols.step_context import StepContext
from noeta.protocols.view import View


@dataclass(frozen=True)
class LLMPolicy:
    """Deterministic and I/O-free: it runs inside the workflow."""

    def decide(self, ctx: StepContext, view: View) -> Decision:
        """Call the model first; finish with its text when it ends a turn without tool calls; else run the
        tools (then the sub-agents) it called that have no result yet."""
        last = view.last
        if last is None:
            return CallModel()
        if last.role == "assistant" and not last.tool_uses:
            return Finish(answer=last.text)
        # The model's latest turn and the results that came after it: only those answer its
        # calls (ids may repeat across turns).
        answered: set[str] = set()
        for message in reversed(view.transcript):
            if message.role == "assistant":
                pending = [c for c in message.tool_uses if c.call_id not in answered]
                break
            answered.update(b.call_id for b in message.content if isinstance(b, ToolResultBlock))
        else:
            return CallModel()
        tools = [c for c in pending if c.tool_name not in ctx.subagents]
        if tools:
            return CallTools(calls=tools)
        if pending:  # sub-agent calls, one after the other, once the turn's tools have run
            call = pending[0]
            goal = call.arguments.get("goal") if isinstance(call.arguments, dict) else None
            return SpawnSubtask(goal=goal if isinstance(goal, str) else "", call_id=call.call_id, agent=call.tool_name)
        return CallModel()
