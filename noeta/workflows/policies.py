"""Loading the task's policy inside the workflow."""

from __future__ import annotations

from typing import Any

from temporalio.exceptions import ApplicationError

from noeta.builtins.llm_policy import LLMPolicy
from noeta.errors import PolicyLoadError
from noeta.protocols.policy import Policy, in_process_policy
from noeta.protocols.task import PolicyRef


def load_policy(ref: PolicyRef | None) -> Policy:
    """The default LLM policy, or the class ``ref`` names built from its recorded parameters."""
    if ref is None:
        return LLMPolicy()
    module_name, _, qualname = ref.path.partition(":")
    try:
        target: Any = in_process_policy(ref.path)
        if target is None:
            # __import__ goes through the sandbox importer; importlib would bypass its checks.
            target = __import__(module_name, fromlist=["__name__"])
            for part in qualname.split("."):
                target = getattr(target, part)
        policy: Policy = target(**ref.params)
        return policy
    except Exception as err:  # any failure here is a configuration error of the task
        raise ApplicationError(
            f"cannot load policy {ref.path!r} inside the workflow: {err}. A policy must be a "
            "module-level class importable by the worker (or, with query(), a class of the running "
            "script), built from its dataclass fields.",
            type=PolicyLoadError.__name__,
            non_retryable=True,
        ) from err
