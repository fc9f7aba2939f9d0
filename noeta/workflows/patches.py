"""``workflow.patched`` for both workflow types.

``AgentWorkflow.builtin`` came after the patches below: no history of that type predates them, so
its tasks always take their new path without asking. Asking would cost each task two history
events per patch (the marker and Temporal's ``TemporalChangeVersion`` upsert) for nothing.
A patch added from now on is asked on both types, like any patch (docs/operations.md).
"""

from __future__ import annotations

from temporalio import workflow

from noeta.protocols.names import (
    BUILTIN_POLICY_WORKFLOW_NAME,
    PATCH_BUDGETS,
    PATCH_BUILTIN_POLICY_CHILDREN,
    PATCH_LEAN_STEPS,
    PATCH_REFUSALS_RECORDED,
    PATCH_TASK_RESOURCES,
)

#: The patches released before AgentWorkflow.builtin existed: always on for that type.
BEFORE_BUILTIN_POLICY_WORKFLOW = frozenset(
    {PATCH_LEAN_STEPS, PATCH_BUDGETS, PATCH_TASK_RESOURCES, PATCH_REFUSALS_RECORDED, PATCH_BUILTIN_POLICY_CHILDREN}
)


def by_shape(patch_id: str, shape: int, since_shape: int) -> bool:
    """Whether this task takes the path that ``patch_id`` once gated and tasks of ``shape`` >=
    ``since_shape`` take by their recorded data (noeta.protocols.names, SHAPE_*): a task of a lower
    shape asks the patch, whose marker its history holds if it took the path. A newer task asks it
    only while replaying: its history holds the marker only if a worker of the previous release
    (which asks the patch) ran that part during a rollout, and then asking matches it; without a
    marker, asking during replay records nothing (its answer is not used)."""
    if shape < since_shape:
        return patched(patch_id)
    if workflow.unsafe.is_replaying():
        patched(patch_id)
    return True


def patched(patch_id: str) -> bool:
    """Whether this task takes the path behind ``patch_id`` (see the module docstring)."""
    if patch_id in BEFORE_BUILTIN_POLICY_WORKFLOW and workflow.info().workflow_type == BUILTIN_POLICY_WORKFLOW_NAME:
        return True
    return workflow.patched(patch_id)
