"""Build b of the same policy: refunds now need a ticket, so a refund goal is answered without
the tool (replaying a history of build a under it fails: its commands differ)."""

from __future__ import annotations

from dataclasses import dataclass

from noeta.protocols.decisions import Finish
from noeta.protocols.step_context import StepContext
from noeta.protocols.view import View

BUILD = "b"


@dataclass(frozen=True)
class TriagePolicy:
    def decide(self, ctx: StepContext, view: View) -> Finish:
        goal = [m for m in view.transcript if m.role == "user"][-1].text
        if goal.startswith("refund"):
            return Finish(answer=f"{BUILD}: refunds need a ticket")
        return Finish(answer=f"{BUILD}: {goal} ({len(view.transcript)} messages)")
