"""Policies for the policy-replay tests (module level: the workflow and the CLI load them by path)."""

from __future__ import annotations

from dataclasses import dataclass

from noeta.builtins.llm_policy import LLMPolicy
from noeta.protocols.decisions import CallModel, Decision, Finish
from noeta.protocols.step_context import StepContext
from noeta.protocols.view import View


@dataclass(frozen=True)
class ViewDependentPolicy:
    """The LLM policy, except that each model call offers only the count tool and asks for a
    max_tokens computed from the View (turn, budget and usage so far): its recorded requests show
    whether a replay rebuilt the View the workflow had. With ``stop_at`` set, a goal whose turn
    count reaches it finishes instead of calling the model."""

    stop_at: int | None = None

    def decide(self, ctx: StepContext, view: View) -> Decision:
        decision = LLMPolicy().decide(ctx, view)
        if not isinstance(decision, CallModel):
            return decision
        if self.stop_at is not None and view.turn >= self.stop_at:
            return Finish(answer=f"stopped after {view.turn} turns")
        return CallModel(tools=["count"], max_tokens=1000 + 100 * view.turn + 10 * view.budget + view.usage.output)


@dataclass(frozen=True)
class StopJobSevenEarly:
    """The LLM policy, except in the task whose goal is "job 7": before its third model call it
    finishes with an answer of its own (no model asked)."""

    def decide(self, ctx: StepContext, view: View) -> Decision:
        if view.transcript and view.transcript[0].text == "job 7" and view.turn == 2:
            return Finish(answer="two counts are enough")
        return LLMPolicy().decide(ctx, view)


@dataclass(frozen=True)
class BrokenAtTurnTwo:
    """Raises before the second model call of every goal."""

    def decide(self, ctx: StepContext, view: View) -> Decision:
        if view.turn == 1:
            raise RuntimeError("no second call")
        return LLMPolicy().decide(ctx, view)


stop_at_three = ViewDependentPolicy(stop_at=3)
