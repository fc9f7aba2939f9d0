"""The Policy interface: ``decide(ctx, view) -> Decision``.

A policy runs inside the Temporal workflow, so it must be deterministic and do no I/O. It is
mounted by ``Options.policy`` and loaded in the workflow by import path, so for a worker in another
process its class must be importable (module level, not ``__main__``); its constructor arguments
must be dataclass fields (or none). A policy class that only the running process has (defined in
the script that calls ``query()``, whose worker runs in that process) is served from
:func:`serve_in_process`'s table instead.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from noeta.protocols.decisions import Decision
from noeta.protocols.step_context import StepContext
from noeta.protocols.view import View


@runtime_checkable
class Policy(Protocol):
    """Decides a task's next step from what it knows (see the module); deterministic, no I/O."""
    def decide(self, ctx: StepContext, view: View) -> Decision:
        """The next step: call the model, run tools, spawn a subtask or finish."""


#: Policy classes this process serves to its own in-process worker, by the path a task names them
#: with (``module:QualName``). The workflow package and this module are passed through Temporal's
#: sandbox, so a sandboxed workflow reads this same table.
_IN_PROCESS: dict[str, type[Any]] = {}


def policy_path(cls: type[Any]) -> str:
    """The ``module:QualName`` a task names the policy class ``cls`` by."""
    return f"{cls.__module__}:{cls.__qualname__}"


def importable_by_path(cls: type[Any]) -> bool:
    """Whether a worker in another process could import ``cls`` by its path (not a class of a
    running script, ``__main__``, nor one defined inside a function)."""
    return cls.__module__ != "__main__" and "<locals>" not in cls.__qualname__


def serve_in_process(cls: type[Any]) -> None:
    """Let this process's workflows load ``cls`` by its path without importing it: for a policy
    class defined in the script that runs ``query()``. Raises ValueError when another class is
    already served under the same path (two scripts' classes of one name in one process)."""
    path = policy_path(cls)
    if _IN_PROCESS.setdefault(path, cls) is not cls:
        raise ValueError(f"another policy class is already served in this process as {path!r}")


def in_process_policy(path: str) -> type[Any] | None:
    """The class :func:`serve_in_process` serves under ``path``, if any."""
    return _IN_PROCESS.get(path)
