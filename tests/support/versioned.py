"""A workflow change made the documented way (docs/operations.md, "Changing workflow code"), and
the same change made naively, for tests/test_versioning.py.

The example change adds a command (a short durable timer) at the start of every task. Tasks that
started before it have no such command in their history, so the new code must take the old path
when it replays them: ``workflow.patched`` is False while replaying a history recorded without
the patch marker, and True (recording the marker) for new tasks.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from noeta.protocols.names import (
    BUILTIN_POLICY_WORKFLOW_NAME,
    WORKFLOW_NAME,
)
from noeta.protocols.task import (
    TaskInput,
    TaskResult,
)
from noeta.workflows import AgentWorkflow, BuiltinPolicyWorkflow

#: The patch id: one per change, never reused.
EXAMPLE_PATCH = "example-settle-timer"


@workflow.defn(name=WORKFLOW_NAME)
class PatchedAgentWorkflow(AgentWorkflow):
    @workflow.run
    async def run(self, task: TaskInput) -> TaskResult:
        if workflow.patched(EXAMPLE_PATCH):
            await workflow.sleep(timedelta(milliseconds=10), summary="example change")
        return await super().run(task)


@workflow.defn(name=BUILTIN_POLICY_WORKFLOW_NAME, sandboxed=False)
class PatchedBuiltinPolicyWorkflow(BuiltinPolicyWorkflow):
    """The same change in the other workflow type (both run the same code)."""

    @workflow.run
    async def run(self, task: TaskInput) -> TaskResult:
        if workflow.patched(EXAMPLE_PATCH):
            await workflow.sleep(timedelta(milliseconds=10), summary="example change")
        return await super().run(task)


@workflow.defn(name=WORKFLOW_NAME)
class UnpatchedAgentWorkflow(AgentWorkflow):
    """The same change without ``workflow.patched``: running tasks would break."""

    @workflow.run
    async def run(self, task: TaskInput) -> TaskResult:
        await workflow.sleep(timedelta(milliseconds=10), summary="example change")
        return await super().run(task)
