"""Build a of a user's policy: a refund goal calls the refund tool (which a guard holds for a
person's approval), any other goal is answered directly."""

from __future__ import annotations

from dataclasses import dataclass

from noeta.protocols.decisions import CallTools, Finish
from noeta.protocols.messages import ToolResultBlock, ToolUseBlock
from noeta.protocols.step_context import StepContext
from noeta.protocols.view import View

BUILD = "a"


@dataclass(frozen=True)
class TriagePolicy:
    def decide(self, ctx: StepContext, view: View) -> CallTools | Finish:
        goal = [m for m in view.transcript if m.role == "user"][-1].text
        if goal.startswith("refund"):
            done = [b for b in view.transcript[-1].content if isinstance(b, ToolResultBlock)]
            if not done:
                return CallTools(calls=[ToolUseBlock("c1", "refund", {"amount": 5})])
            return Finish(answer=f"{BUILD}: {done[0].output}")
        return Finish(answer=f"{BUILD}: {goal} ({len(view.transcript)} messages)")
