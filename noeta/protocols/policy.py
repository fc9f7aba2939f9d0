"""The Policy interface: ``decide(ctx, view) -> Decision``.

A policy runs inside the Temporal workflow, so it must be deterministic and do no I/O. It is
mounted by ``Options.policy`` and loaded in the workflow by import path, so its class must be
importable (module level, not ``__main__``) and its constructor arguments must be dataclass
fields (or none).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from noeta.protocols.decisions import Decision
from noeta.protocols.step_context import StepContext
from noeta.protocols.view import View


@runtime_checkable
class Policy(Protocol):
    """Decides a task's next step from what it knows (see the module); deterministic, no I/O."""
    def decide(self, ctx: StepContext, view: View) -> Decision:
        """The next step: call the model, run tools, spawn a subtask or finish."""
