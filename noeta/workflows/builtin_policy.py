"""The workflow type of tasks on the built-in policy: AgentWorkflow outside the sandbox."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from noeta.errors import ConfigurationError
from noeta.protocols.names import BUILTIN_POLICY_WORKFLOW_NAME, WORKFLOW_NAME
from noeta.protocols.task import TaskInput, TaskResult
from noeta.workflows.agent import AgentWorkflow


@workflow.defn(name=BUILTIN_POLICY_WORKFLOW_NAME, sandboxed=False)
class BuiltinPolicyWorkflow(AgentWorkflow):
    """AgentWorkflow for tasks on the built-in LLM policy, run outside the workflow sandbox.

    Only Noeta's code runs in it (deterministic, proven by the recorded histories' replay), so the
    sandbox's run-time checks protect nothing here while costing every activation and payload a
    trip into the sandbox. A task with a policy of its own is refused: user code keeps the sandbox.
    """

    @workflow.run
    async def run(self, task: TaskInput) -> TaskResult:
        """Run the task as AgentWorkflow does; a task with a policy of its own fails with
        ConfigurationError."""
        if task.policy is not None:
            message = (
                f"policy {task.policy.path!r} is user code: such tasks run as {WORKFLOW_NAME} (in the "
                f"sandbox), not {BUILTIN_POLICY_WORKFLOW_NAME}"
            )
            raise ApplicationError(message, {"message": message}, type=ConfigurationError.__name__, non_retryable=True)
        return await super().run(task)
