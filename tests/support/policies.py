"""Custom policies for tests: module level, so the workflow can import them by path."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from noeta.protocols.decisions import CallModel, Finish, SpawnSubtask
from noeta.protocols.messages import ToolResultBlock
from noeta.protocols.step_context import StepContext
from noeta.protocols.view import View


@dataclass(frozen=True)
class EchoTwicePolicy:
    """Calls the model ``times`` times, then finishes with the texts joined by ``sep``."""

    times: int = 2
    sep: str = "|"

    def decide(self, ctx: StepContext, view: View) -> CallModel | Finish:
        replies = [m.text for m in view.transcript if m.role == "assistant"]
        if len(replies) < self.times:
            return CallModel()
        return Finish(answer=self.sep.join(replies))


@dataclass(frozen=True)
class DelegatingPolicy:
    """Hands the goal to a subtask, then finishes with the subtask's answer."""

    def decide(self, ctx: StepContext, view: View) -> SpawnSubtask | Finish | CallModel:
        if "parent" in ctx.metadata:  # inside the child: plain model call, then finish
            last = view.last
            if last is not None and last.role == "assistant":
                return Finish(answer=last.text)
            return CallModel()
        results = [b for m in view.transcript for b in m.content if isinstance(b, ToolResultBlock)]
        if not results:
            return SpawnSubtask(goal="sub: " + view.transcript[0].text, call_id="delegate-1")
        return Finish(answer=f"child said: {results[0].output}")


@dataclass(frozen=True)
class AlwaysFinish:
    """Finishes with a draft at once, every time it is asked (never calls the model)."""

    def decide(self, ctx: StepContext, view: View) -> Finish:
        return Finish(answer="a draft")


class TenantScope(BaseModel):
    tenantId: str
    debug: bool = False


@dataclass(frozen=True)
class ScopeReadingPolicy:
    """Answers from the scope alone (``ctx.expect_scope``), without calling the model."""

    def decide(self, ctx: StepContext, view: View) -> Finish:
        scope = ctx.expect_scope(TenantScope)
        return Finish(answer=f"tenant {scope.tenantId} debug={scope.debug}")


@dataclass(frozen=True)
class ScopedDelegatingPolicy:
    """Spawns one plain subtask with a scope of its own, then finishes with its answer."""

    def decide(self, ctx: StepContext, view: View) -> SpawnSubtask | Finish:
        results = [b for m in view.transcript for b in m.content if isinstance(b, ToolResultBlock)]
        if not results:
            return SpawnSubtask(goal="read the tenant", call_id="s1", scope={"tenantId": "7"})
        return Finish(answer=str(results[0].output))
@dataclass(frozen=True)
class ThinkThenDelegate:
    """Calls the model once, then hands the goal to a subtask (which runs the default policy),
    then finishes with the subtask's answer or failure."""

    def decide(self, ctx: StepContext, view: View) -> SpawnSubtask | Finish | CallModel:
        if not any(m.role == "assistant" for m in view.transcript):
            return CallModel()
        results = [b for m in view.transcript for b in m.content if isinstance(b, ToolResultBlock)]
        if not results:
            return SpawnSubtask(goal="sub: " + view.transcript[0].text, call_id="delegate-1")
        return Finish(answer=f"child said: {results[0].output or results[0].error}")


@dataclass(frozen=True)
class NotADecisionPolicy:
    """A buggy policy: returns a string where a Decision is due."""

    def decide(self, ctx: StepContext, view: View) -> str:
        return "finish, please"
