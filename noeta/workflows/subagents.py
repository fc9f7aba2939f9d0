"""Sub-agents: the child task a SpawnSubtask starts, and what comes back to the parent.

A declared sub-agent (``Options.subagents``) runs with its own options: tools, system prompt,
policy, output schema, sub-agents of its own. A plain SpawnSubtask (a hand-written policy's) runs
with the task's provider and tools and the default policy. Both inherit the parent's scope chain
(plus the spawn's own scope level) and the resources the parent and its ancestors expose.
"""

from __future__ import annotations

import dataclasses

from noeta.protocols.decisions import SpawnSubtask
from noeta.protocols.resources import RunEnv
from noeta.protocols.scope import ScopeLevel, merge_scopes
from noeta.protocols.step_context import StepContext
from noeta.protocols.task import Carry, SubAgentSpec, TaskInput


def run_env(task: TaskInput, state: Carry) -> RunEnv | None:
    """What the task's activities need to give user code its scope and resources (None: nothing)."""
    if not (task.scope or state.owned_resources or task.inherited_resources):
        return None
    return RunEnv(
        scope=merge_scopes(task.scope),
        owned=[r.key for r in state.owned_resources],
        inherited=dict(task.inherited_resources),
    )


def find_agent(task: TaskInput, name: str | None) -> SubAgentSpec | None:
    """The declared sub-agent named ``name``, or None."""
    return next((a for a in task.subagents if a.name == name), None)


def spawn_problem(task: TaskInput, spawn: SpawnSubtask) -> str | None:
    """Why a spawn cannot run (told to the model like a failed tool call), or None."""
    if spawn.agent is not None and find_agent(task, spawn.agent) is None:
        known = ", ".join(a.name for a in task.subagents) or "none"
        return f"Unknown sub-agent {spawn.agent!r}. Available sub-agents: {known}."
    if not isinstance(spawn.goal, str) or not spawn.goal.strip():
        return f"Sub-agent {spawn.agent or 'subtask'!r} needs a non-empty 'goal' string."
    return None


def child_task(task: TaskInput, state: Carry, ctx: StepContext, spawn: SpawnSubtask, child_id: str) -> TaskInput:
    """The child's input: the declared agent's, or the parent's own for a plain spawn."""
    levels = list(task.scope)
    if spawn.scope:
        levels.append(ScopeLevel(ctx.task_id, dict(spawn.scope)))
    inherited = {**task.inherited_resources, **{r.key: ctx.task_id for r in state.owned_resources if r.expose}}
    agent = find_agent(task, spawn.agent)
    if agent is None:
        # The task's provider, limits, guards and channels; it answers in text (no output schema
        # or validators), with the default policy, and shares the trace.
        return dataclasses.replace(
            task,
            goal=spawn.goal,
            images=[],
            system_prompt=spawn.system_prompt or task.system_prompt,
            tools=spawn.tools if spawn.tools is not None else task.tools,
            # The identities this task recorded hold for its sub-agent too (tools named by string).
            tool_fingerprints={**{t.name: t.fingerprint for t in state.tools}, **task.tool_fingerprints},
            policy=None,
            keep_open=False,
            trace_id=ctx.trace_id,
            output_schema=None,
            validators=[],
            metadata={**task.metadata, "scope": spawn.scope, "parent": ctx.task_id, "agent": None},
            resources=[],
            inherited_resources=inherited,
            scope=levels,
            scope_schema=None,
            subagents=[],
            carry=None,
        )
    spec = agent.task
    own = [ScopeLevel(child_id, level.values) for level in spec.scope]  # the agent's own equip_scope
    return dataclasses.replace(
        spec,
        goal=spawn.goal,
        provider=spec.provider or task.provider,
        model=spec.model if spec.model is not None or spec.provider else task.model,
        # With the parent's provider come the parent's fallbacks (unless it declares its own).
        fallback_providers=spec.fallback_providers or ([] if spec.provider else task.fallback_providers),
        system_prompt=spawn.system_prompt or spec.system_prompt,
        keep_open=False,
        trace_id=ctx.trace_id,
        workspace_dir=spec.workspace_dir or task.workspace_dir,
        index=task.index,
        # The parent's guards keep watching what its sub-agents do.
        guards=[*task.guards, *(g for g in spec.guards if g not in task.guards)],
        metadata={**task.metadata, **spec.metadata, "parent": ctx.task_id, "agent": agent.name},
        inherited_resources=inherited,
        scope=levels + own,
        carry=None,
    )
