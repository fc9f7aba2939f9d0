"""A user policy that imports only Noeta's pure modules, so it loads in a strict sandbox too."""

from __future__ import annotations

from dataclasses import dataclass

from noeta.builtins.llm_policy import LLMPolicy
from noeta.protocols.decisions import Decision
from noeta.protocols.step_context import StepContext
from noeta.protocols.view import View


@dataclass(frozen=True)
class WrappedLLMPolicy:
    """User code around the built-in LLM policy: such a task runs in the sandboxed workflow type, so
    the built-in policy's code runs in the sandbox too."""

    def decide(self, ctx: StepContext, view: View) -> Decision:
        return LLMPolicy().decide(ctx, view)
