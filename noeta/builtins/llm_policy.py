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
        last = view.last
        if last is None or last.role != "assistant":
            return CallModel()
        calls = last.tool_uses
        if calls:
            # Only results after this message answer it: ids may repeat across turns.
            answered: set[str] = set()
            for m in reversed(view.transcript):
                if m is last:
                    break
                answered.update(b.call_id for b in m.content if isinstance(b, ToolResultBlock))
            pending = [c for c in calls if c.call_id not in answered]
            tools = [c for c in pending if c.tool_name not in ctx.subagents]
            if tools:
                return CallTools(calls=tools)
            if pending:
                call = pending[0]
                goal = call.arguments.get("goal") if isinstance(call.arguments, dict) else None
                return SpawnSubtask(goal=goal if isinstance(goal, str) else "", call_id=call.call_id, agent=call.tool_name)
            return CallModel()
        return Finish(answer=last.text)
