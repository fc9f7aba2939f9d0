"""What one run of AgentWorkflow holds: the task as this run received it, its Carry, the
transcript and the tools.

The workflow is composed of objects that each own a part of the run (the gate, the step runner,
the goal loop, continue-as-new, the run's status); each is given this object explicitly and
reads or changes only what it needs of it.
"""

from __future__ import annotations

import dataclasses

from noeta.protocols.messages import Message
from noeta.protocols.resources import RunEnv
from noeta.protocols.task import Carry, PrepareOutput, TaskInput
from noeta.protocols.tool import ToolSpec
from noeta.protocols.names import PATCH_LOCAL_RECOVERY
from noeta.workflows import patches
from noeta.workflows.subagents import run_env


def starting_carry(task: TaskInput) -> Carry:
    """The state a run starts from: its carry (copied: the input stays as recorded) or a fresh one."""
    carry = task.carry
    if carry is None:  # a first run: the first goal's caller may follow it by its id (Client.send)
        return Carry(goal_ids={task.goal_id: 0} if task.goal_id else {})
    return dataclasses.replace(
        carry,
        pending=list(carry.pending),
        tools=list(carry.tools),
        validation_issues=list(carry.validation_issues),
        injections=list(carry.injections),
        goal_queue=list(carry.goal_queue),
        goal_ids=dict(carry.goal_ids),
        recent_results=dict(carry.recent_results),
        budget_warned=list(carry.budget_warned),
        learned_windows=dict(carry.learned_windows),
        steering=list(carry.steering),
        steered_into=dict(carry.steered_into),
    )


class RunState:
    """The state of one run, shared by the objects the workflow is composed of."""

    def __init__(self, task: TaskInput) -> None:
        """The run's state, starting from ``task`` (what a continued run carries is in its input).
        """
        self.task = task
        """The task as this run received it (never changed: continue-as-new hands on a copy)."""
        self.state = starting_carry(task)
        """Everything the task keeps beyond this run; handed on, trimmed, by continue-as-new."""
        self.transcript: list[Message] = []
        """The stored transcript (loaded on resume) plus what is pending for the next model call."""
        self.tools: dict[str, ToolSpec] = {spec.name: spec for spec in self.state.tools}
        """The task's tools by name, as prepare_task recorded them."""
        self.recovering = False
        """A call came back from its step record (its first run was lost with a workflow task): the
        next model call is an ordinary activity, so the recovered chain reaches the server."""

    def returned(self, from_record: bool) -> None:
        """A step's output came back; ``from_record``: the record of an earlier, lost run of it."""
        if from_record and self.task.model_local_activity and not self.recovering:
            self.recovering = patches.patched(PATCH_LOCAL_RECOVERY)

    def append(self, message: Message) -> None:
        """A message for the model's next call: in the transcript, and pending in the carry."""
        self.transcript.append(message)
        self.state.pending.append(message)

    def prepared(self, plan: PrepareOutput, trace_id: str) -> None:
        """Keep what prepare_task recorded for a new task (a continued run has it in its carry)."""
        state = self.state
        state.tools, state.trace_id = plan.tools, trace_id
        state.system_ref, state.output_schema_ref = plan.system_ref, plan.output_schema_ref
        state.volatile_ref, state.mcp_tools_ref = plan.volatile_ref, plan.mcp_tools_ref
        state.owned_resources, state.agents_ref = list(plan.resources), plan.agents_ref
        state.shape = plan.shape
        self.tools = {spec.name: spec for spec in plan.tools}

    def env(self) -> RunEnv | None:
        """What activities need to give user code its scope and resources (None: nothing)."""
        return run_env(self.task, self.state)
