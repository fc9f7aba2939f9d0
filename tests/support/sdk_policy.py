"""A custom policy written the way users write them: against the public ``noeta.sdk`` facade.

It reports the identity of Noeta's classes as seen from inside the workflow sandbox, so a test can
tell whether the sandbox shared the worker's modules or imported its own copies.
"""

from __future__ import annotations

from dataclasses import dataclass

from noeta.sdk import CallModel, Finish, StepContext, View


@dataclass(frozen=True)
class IdentityPolicy:
    def decide(self, ctx: StepContext, view: View) -> CallModel | Finish:
        return Finish(answer=f"{id(CallModel)} {id(Finish)}")

