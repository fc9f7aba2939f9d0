"""A custom policy written the way users write them: against the public ``noeta.sdk`` facade.

It reports the identity of Noeta's classes as seen from inside the workflow sandbox, so a test can
tell whether the sandbox shared the worker's modules or imported its own copies.
"""

from __future__ import annotations

from dataclasses import dataclass

import noeta.sdk
from noeta.sdk import CallModel, Finish, StepContext, View


@dataclass(frozen=True)
class IdentityPolicy:
    def decide(self, ctx: StepContext, view: View) -> CallModel | Finish:
        return Finish(answer=f"{id(CallModel)} {id(Finish)}")



@dataclass(frozen=True)
class LazyNamePolicy:
    """Loads a name the facade imports on first use (``ObservedCall``) from inside the sandbox."""

    def decide(self, ctx: StepContext, view: View) -> CallModel | Finish:
        loaded = noeta.sdk.__getattr__("ObservedCall")  # the lazy path, even when already cached
        return Finish(answer=str(id(loaded)))
