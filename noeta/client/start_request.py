"""What a task's workflow start carries, built in one place for every way a task starts.

A task started now (``start``), a fork and each run of a schedule are the same kind of task: the
same workflow type for their policy, the same input (indexed where the cluster has the search
attributes), the same queue check, the same summary and details in the Temporal UI and the same
search attributes (tenant, API key, goal, metadata). :func:`workflow_start` builds them; the
caller sends them, as a start request or as a schedule's action.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypedDict

from temporalio.common import Priority, TypedSearchAttributes

from noeta.client.connection import Connection
from noeta.client.priority import task_priority
from noeta.client.visibility import initial_search_attributes
from noeta.errors import ConfigurationError
from noeta.protocols.ids import check_task_queue
from noeta.protocols.names import (
    AGENT_METADATA_KEY,
    BASE_SEARCH_ATTRIBUTES,
    DEFAULT_TENANT,
    SA_API_KEY,
    SA_COST_USD,
    SA_EVAL,
    SA_SCORE,
    SA_TENANT,
    workflow_name_for,
)
from noeta.protocols.task import TaskInput

#: The longest static summary (the Temporal UI's one-line title of a task).
SUMMARY_CHARS = 200


class StartKeywords(TypedDict, total=False):
    """The keywords of every call that starts a task (``start``, ``fork``, ``send``,
    ``create_schedule``), each None when not given; :class:`StartAs` holds them."""

    task_queue: str | None
    """The queue it runs on (None: the client's, or a fork's source's)."""
    api_key_id: str | None
    """The ``noeta serve`` API key that starts it, indexed as NoetaApiKey so the key's spend can be summed."""
    tenant: str | None
    """Its tenant (NoetaTenant)."""
    identity: str | None
    """Who acts, as Temporal records it (None: the client's identity)."""


@dataclasses.dataclass(frozen=True)
class StartAs:
    """How a task is started: on which queue (None: the client's, or a fork's source's), for
    which ``noeta serve`` API key (indexed as NoetaApiKey) and tenant (NoetaTenant), and as which
    caller identity Temporal records (None: the client's)."""

    task_queue: str | None = None
    api_key_id: str | None = None
    tenant: str | None = None
    identity: str | None = None
    eval_id: str | None = None
    """The eval run the task belongs to (indexed as NoetaEval where the cluster has it)."""

    @classmethod
    def given(cls, keywords: StartKeywords) -> StartAs:
        """How a call's start keywords start the task; TypeError for a keyword that is not one
        (as Python raises for any unknown keyword: these arrive as ``**start_as``)."""
        unknown = sorted(set(keywords) - StartKeywords.__optional_keys__)
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
                            f"a start takes {', '.join(sorted(StartKeywords.__optional_keys__))}")
        return cls(**keywords)


@dataclasses.dataclass(frozen=True)
class WorkflowStart:
    """Everything a task's workflow is started with, but its id."""

    workflow: str
    """The workflow type (sandboxed when the task has a policy of its own)."""
    task_input: TaskInput
    """The input, with what the cluster can index switched on."""
    task_queue: str
    static_summary: str
    """The Temporal UI's title of the task: its goal (after its agent version, if it has one)."""
    static_details: str
    """The Temporal UI's details of the task: provider, model, tools, max_turns (and where it came from)."""
    search_attributes: TypedSearchAttributes | None
    """What the task is indexed with from its start (None on a cluster without the attributes)."""
    priority: Priority
    """Its priority and its tenant's fairness key and weight (noeta.client.priority): the server
    gives them to every workflow task, activity and sub-agent of the task."""

    def request_options(self) -> RequestOptions:
        """The start request's keywords (``start_workflow``'s and ``WithStartWorkflowOperation``'s)."""
        return RequestOptions(
            task_queue=self.task_queue, static_summary=self.static_summary, static_details=self.static_details,
            search_attributes=self.search_attributes, priority=self.priority,
        )


class RequestOptions(TypedDict):
    """The keywords a start request takes from a :class:`WorkflowStart`, besides its workflow,
    input and id: the same for a start and a start with an update."""

    task_queue: str
    static_summary: str
    static_details: str
    search_attributes: TypedSearchAttributes | None
    priority: Priority


async def workflow_start(
    connection: Connection,
    task_input: TaskInput,
    start_as: StartAs,
    *,
    task_queue: str,
    indexed_metadata: Sequence[str] = (),
    forked_from: str | None = None,
    schedule_id: str | None = None,
) -> WorkflowStart:
    """The start of ``task_input``'s workflow for ``start_as`` on ``start_as.task_queue`` or else
    ``task_queue`` (ConfigurationError for a bad queue, or for a tenant other than ``default`` on a
    cluster that could not keep its tasks apart). ``forked_from``: the task a fork was taken from;
    ``schedule_id``: the schedule whose runs start this way (named in the UI's details)."""
    goal, provider_name = task_input.goal, task_input.provider
    api_key_id, tenant = start_as.api_key_id, start_as.tenant
    priority = task_priority(task_input.priority, tenant)
    queue = check_task_queue(start_as.task_queue or task_queue)
    registered = await connection.registered_attributes()
    indexed = set(BASE_SEARCH_ATTRIBUTES) <= registered
    if indexed:
        task_input = dataclasses.replace(task_input, index=True, index_cost=await connection.has_attribute(SA_COST_USD))
        if task_input.scoring is not None and await connection.has_attribute(SA_SCORE):
            task_input = dataclasses.replace(task_input, scoring=dataclasses.replace(task_input.scoring, index=True))
    eval_id = start_as.eval_id if start_as.eval_id and await connection.has_attribute(SA_EVAL) else None
    if api_key_id is not None and not await connection.has_attribute(SA_API_KEY):
        api_key_id = None  # an older cluster: `noeta setup` registers it
    if tenant is not None and not (indexed and await connection.has_attribute(SA_TENANT)):
        if tenant != DEFAULT_TENANT:  # the task would be visible to every tenant
            raise ConfigurationError(f"tasks of tenant {tenant!r} need the {SA_TENANT} search attribute: run `noeta setup`")
        tenant = None
    details = (
        f"**provider** {provider_name} · **model** {task_input.model or 'default'} · "
        f"**tools** {', '.join(task_input.tools) or 'none'} · **max_turns** {task_input.max_turns}"
    )
    title = goal
    agent = task_input.metadata.get(AGENT_METADATA_KEY)
    if agent:  # the agent version heads the task's title in the UI, the goal after it
        details += f" · **agent** {agent}"
        title = f"{agent} · {goal}"
    if task_input.fork:
        details += f" · **forked from** {forked_from} at turn {task_input.fork.turn}"
    if schedule_id is not None:
        details += f" · **schedule** {schedule_id}"
    if task_input.priority is not None:
        details += f" · **priority** {task_input.priority}"
    return WorkflowStart(
        workflow=workflow_name_for(task_input.policy),
        task_input=task_input,
        task_queue=queue,
        static_summary=title if len(title) <= SUMMARY_CHARS else title[: SUMMARY_CHARS - 1] + "…",
        static_details=details,
        search_attributes=initial_search_attributes(
            registered, None if connection.encrypted else goal, task_input.model, task_input.metadata,
            indexed_metadata, api_key_id, forked_from, tenant, eval_id,
        )
        if indexed
        else None,
        priority=priority,
    )


__all__ = ["SUMMARY_CHARS", "RequestOptions", "StartAs", "StartKeywords", "WorkflowStart", "workflow_start"]
