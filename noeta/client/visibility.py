"""Finding tasks: Noeta's search attributes on a cluster, what a task starts with, the visibility
queries behind ``list_tasks`` (CLI ``noeta tasks``, ``GET /tasks``, the console), and the summary
and description of a task as seen from outside.

Search-attribute names live in :mod:`noeta.protocols.names`, typed keys in
:mod:`noeta.temporal.search_attributes`; this module names each attribute by its typed key (``.name``
in queries), so the attribute a task is checked for is the one it is given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client as TemporalClient
from temporalio.client import WorkflowExecution, WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError

from noeta.temporal import search_attributes as keys
from noeta.errors import ConfigurationError, NoetaError
from noeta.protocols.names import (
    AGENT_METADATA_KEY,
    BASE_SEARCH_ATTRIBUTES,
    DEFAULT_TENANT,
    GOAL_ATTRIBUTE_CHARS,
    SEARCH_ATTRIBUTES,
    WORKFLOW_TYPES_QUERY,
)
from noeta.protocols.statuses import TASK_STATUSES, TaskStatus, is_task_status
from noeta.protocols.task import TaskResult

#: NoetaStatus values -> Temporal execution status, for clusters without the search attributes.
_EXECUTION_STATUS: dict[TaskStatus, str] = {
    "running": "Running", "idle": "Running", "awaiting_approval": "Running", "completed": "Completed",
    "failed": "Failed", "cancelled": "Canceled", "terminated": "Terminated", "timed_out": "TimedOut",
}
#: Status of a closed workflow that has no TaskResult.
CLOSED_STATUS: dict[WorkflowExecutionStatus, TaskStatus] = {
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TERMINATED: "terminated",
    WorkflowExecutionStatus.TIMED_OUT: "timed_out",
}
#: Status of a task without NoetaStatus (a cluster without the search attributes), from its
#: execution status: a run that continued as new belongs to a task that goes on.
EXECUTION_TASK_STATUS: dict[WorkflowExecutionStatus, TaskStatus] = {
    WorkflowExecutionStatus.RUNNING: "running",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: "running",
    WorkflowExecutionStatus.COMPLETED: "completed",
    **CLOSED_STATUS,
}
_INDEXED_TYPE = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Text": IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "Double": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
    "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}
#: What a search or a filter value may contain: it goes into a visibility query, so no quotes.
_SAFE_VALUE = re.compile(r"[^'\"\\\x00-\x1f]{1,200}")
_METADATA_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: Temporal's own search attribute of a versioned execution's version (set by the server).
WORKER_VERSION_ATTRIBUTE = "TemporalWorkerDeploymentVersion"


@dataclass(frozen=True)
class TaskSummary:
    """One task in a list (from the visibility store, which lags a moment behind the tasks)."""

    task_id: str
    status: TaskStatus
    """The task's NoetaStatus."""
    goal: str | None
    """The first goal (its first 200 characters); None on clusters without NoetaGoal."""
    model: str | None
    """The model of its last call (NoetaModel)."""
    turns: int
    """Model calls so far (NoetaTurns)."""
    tokens_in: int
    """Input tokens so far (NoetaTokensIn)."""
    tokens_out: int
    """Output tokens so far (NoetaTokensOut)."""
    started: datetime | None
    """When the task started."""
    closed: datetime | None = None
    """When it ended (None while it runs)."""
    metadata: dict[str, str] = field(default_factory=dict)
    """The indexed ``Options.metadata`` entries (NOETA_INDEXED_METADATA)."""
    cost_usd: float | None = None
    """US dollars so far (NoetaCostUSD); None when unknown: no price was known for its model (an
    unpriced call costs nothing anyone knows of, which is not the same as free), or the cluster
    lacks NoetaCostUSD."""
    tenant: str = DEFAULT_TENANT
    """The tenant the task belongs to (NoetaTenant; ``default`` when unset)."""
    score: float | None = None
    """The mean of its online scores (NoetaScore; None when it was not scored)."""
    eval_id: str | None = None
    """The eval run it belongs to (NoetaEval; None for other tasks)."""
    schedule_id: str | None = None
    """The schedule that started it (TemporalScheduledById; None for tasks started otherwise)."""
    forked_from: str | None = None
    """The task this one is a fork of (NoetaForkedFrom; None for a task that is not a fork)."""
    priority: int | None = None
    """The priority it was started with, 1 (first) to 5 (None: none, so Temporal's default 3)."""
    agent: str | None = None
    """The agent version it runs (``triage@2``, docs/versions.md; None: started without an agent)."""
    worker_version: str | None = None
    """The Worker Deployment version its run is pinned to (``deployment:build``; None: unversioned)."""


@dataclass(frozen=True)
class TaskInfo(TaskSummary):
    """One task in detail: its summary, whether it still runs, and once ended its result or error."""

    running: bool = False
    result: TaskResult | None = None
    error: NoetaError | None = None
    """The task's typed error when it failed, was cancelled or terminated (then ``result`` is None)."""


def initial_search_attributes(
    registered: set[str],
    goal: str | None,
    model: str | None,
    metadata: Mapping[str, Any],
    indexed_metadata: Sequence[str],
    api_key_id: str | None = None,
    forked_from: str | None = None,
    tenant: str | None = None,
    eval_id: str | None = None,
) -> TypedSearchAttributes:
    """What a task starts with; the workflow keeps status, turns, tokens (and a resolved model)
    current. ``api_key_id``: the ``noeta serve`` key that starts it (its spend is summed by it).
    ``goal`` None leaves NoetaGoal unset (encrypted tasks: search attributes are stored in plain
    text, so the goal stays in the encrypted payloads). ``forked_from``: the task a fork was taken
    from (NoetaForkedFrom). ``tenant``: the tenant the task belongs to (NoetaTenant). ``eval_id``:
    the eval run it belongs to (NoetaEval)."""
    pairs: list[SearchAttributePair[Any]] = [SearchAttributePair(keys.STATUS, "running"), SearchAttributePair(keys.TURNS, 0)]
    if model:
        pairs.append(SearchAttributePair(keys.MODEL, model))
    if api_key_id:
        pairs.append(SearchAttributePair(keys.API_KEY, api_key_id))
    if tenant and keys.TENANT.name in registered:
        pairs.append(SearchAttributePair(keys.TENANT, tenant))
    if eval_id and keys.EVAL.name in registered:
        pairs.append(SearchAttributePair(keys.EVAL, eval_id))
    if forked_from and keys.FORKED_FROM.name in registered:
        pairs.append(SearchAttributePair(keys.FORKED_FROM, forked_from))
    if goal is not None and keys.GOAL.name in registered:
        pairs.append(SearchAttributePair(keys.GOAL, goal[:GOAL_ATTRIBUTE_CHARS]))
    entries = metadata_entries(metadata, indexed_metadata)
    if entries and keys.METADATA.name in registered:
        pairs.append(SearchAttributePair(keys.METADATA, entries))
    return TypedSearchAttributes(pairs)


def metadata_entries(metadata: Mapping[str, Any], indexed: Iterable[str]) -> list[str]:
    """``key=value`` for each chosen key the task's metadata has (scalars only, 200 chars at most)."""
    entries = []
    for key in dict.fromkeys([*indexed, AGENT_METADATA_KEY]):  # a task's agent version is always findable
        value = metadata.get(key)
        if isinstance(value, (str, int, float, bool)):
            entries.append(f"{key}={value}"[:GOAL_ATTRIBUTE_CHARS])
    return entries


def parse_indexed_metadata(value: str | None) -> tuple[str, ...]:
    """``NOETA_INDEXED_METADATA``: comma-separated metadata keys to make searchable."""
    names = tuple(k.strip() for k in (value or "").split(",") if k.strip())
    bad = [k for k in names if not _METADATA_KEY.fullmatch(k)]
    if bad:
        raise ConfigurationError(f"NOETA_INDEXED_METADATA: {', '.join(map(repr, bad))} are not metadata key names")
    return names


async def registered_search_attributes(temporal: TemporalClient) -> set[str]:
    """Noeta's search attributes the cluster has (empty when it cannot tell, e.g. no permission)."""
    try:
        response = await temporal.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=temporal.namespace)
        )
    except RPCError:
        return set()
    return set(SEARCH_ATTRIBUTES) & set(response.custom_attributes)


async def search_attributes_registered(temporal: TemporalClient) -> bool:
    """Whether tasks can be indexed at all (the attributes of the first release are registered;
    later ones, such as NoetaCostUSD or NoetaGoal, are used where present: ``noeta setup`` adds them)."""
    return set(BASE_SEARCH_ATTRIBUTES) <= await registered_search_attributes(temporal)


async def register_search_attributes(temporal: TemporalClient) -> list[str]:
    """Register the missing Noeta search attributes on the cluster; returns the names added."""
    response = await temporal.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=temporal.namespace)
    )
    missing = {k: v for k, v in SEARCH_ATTRIBUTES.items() if k not in response.custom_attributes}
    if missing:
        await temporal.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=temporal.namespace,
                search_attributes={k: _INDEXED_TYPE[v] for k, v in missing.items()},
            )
        )
    return sorted(missing)


def _checked(value: str, what: str) -> str:
    value = value.strip()
    if not _SAFE_VALUE.fullmatch(value):
        raise ConfigurationError(f"{what} must be 1-200 characters without quotes or backslashes, got {value!r}")
    return value


@dataclass(frozen=True)
class TaskFilter:
    """Which tasks ``list_tasks`` returns (None: any): of ``status`` (NoetaStatus, or without the
    search attributes the execution status), whose goal has the words of ``search``, of ``model``,
    with these indexed ``metadata`` entries, of ``tenant``."""

    status: str | None = None
    search: str | None = None
    model: str | None = None
    metadata: Mapping[str, str] | None = None
    tenant: str | None = None
    schedule: str | None = None
    """Only the runs of this schedule (``Client.schedule_runs``)."""


def task_query(registered: set[str], wanted: TaskFilter = TaskFilter()) -> str:
    """The visibility query for ``list_tasks``; every filter value is checked (no quotes). The
    tenant ``default`` also has the tasks without NoetaTenant."""
    query = WORKFLOW_TYPES_QUERY
    if wanted.tenant is not None:
        query += tenant_filter(registered, wanted.tenant)
    if wanted.schedule is not None:
        query += f" AND {keys.SCHEDULED_BY.name} = '{_checked(wanted.schedule, 'schedule')}'"
    indexed = set(BASE_SEARCH_ATTRIBUTES) <= registered
    status = wanted.status
    if status:
        if status not in TASK_STATUSES:
            raise ConfigurationError(f"not a task status: {status!r}; one of {', '.join(TASK_STATUSES)}")
        if indexed:
            query += f" AND {keys.STATUS.name} = '{status}'"
        else:
            query += f" AND ExecutionStatus = '{_EXECUTION_STATUS[status]}'"
    if wanted.search:
        text = _checked(wanted.search, "search")
        if keys.GOAL.name in registered:  # full-text: matches tasks whose goal has these words
            query += f" AND {keys.GOAL.name} = '{text}'"
        else:
            query += f" AND WorkflowId STARTS_WITH '{text}'"
    if wanted.model:
        if not indexed:
            raise ConfigurationError("filtering by model needs Noeta's search attributes (noeta setup)")
        query += f" AND {keys.MODEL.name} = '{_checked(wanted.model, 'model')}'"
    for key, value in (wanted.metadata or {}).items():
        if keys.METADATA.name not in registered:
            raise ConfigurationError("filtering by metadata needs the NoetaMetadata search attribute (noeta setup)")
        if not _METADATA_KEY.fullmatch(key):
            raise ConfigurationError(f"not a metadata key: {key!r}")
        query += f" AND {keys.METADATA.name} = '{_checked(f'{key}={value}', 'metadata filter')}'"
    return query


def tenant_filter(registered: set[str], tenant: str) -> str:
    """The visibility-query clause (`` AND ...``) that keeps only ``tenant``'s tasks."""
    value = _checked(tenant, "tenant")
    if keys.TENANT.name not in registered:
        if tenant == DEFAULT_TENANT:
            return ""  # a cluster without tenants: every task is the default tenant's
        raise ConfigurationError(f"tenants need the {keys.TENANT.name} search attribute on the cluster (noeta setup)")
    if tenant == DEFAULT_TENANT:
        return f" AND ({keys.TENANT.name} = '{value}' OR {keys.TENANT.name} IS NULL)"
    return f" AND {keys.TENANT.name} = '{value}'"


def tenant_of(attrs: TypedSearchAttributes) -> str:
    """The tenant a task's search attributes say it belongs to (``default`` without NoetaTenant)."""
    return attrs.get(keys.TENANT) or DEFAULT_TENANT


def summary_of(wf: WorkflowExecution) -> TaskSummary:
    """A TaskSummary from a workflow execution's search attributes (the status from the execution's own when
    it was not indexed)."""
    attrs = wf.typed_search_attributes
    entries = attrs.get(keys.METADATA) or []
    status = attrs.get(keys.STATUS)
    if not is_task_status(status):  # not indexed; an unknown execution status reads as get_task's
        status = EXECUTION_TASK_STATUS.get(wf.status, "failed") if wf.status is not None else "failed"
    metadata = dict(e.split("=", 1) for e in entries if "=" in e)
    return TaskSummary(
        task_id=wf.id,
        status=status,
        goal=attrs.get(keys.GOAL),
        model=attrs.get(keys.MODEL),
        turns=attrs.get(keys.TURNS) or 0,
        tokens_in=attrs.get(keys.TOKENS_IN) or 0,
        tokens_out=attrs.get(keys.TOKENS_OUT) or 0,
        started=wf.start_time,
        closed=wf.close_time,
        metadata=metadata,
        cost_usd=attrs.get(keys.COST_USD) or None,
        tenant=tenant_of(attrs),
        score=attrs.get(keys.SCORE),
        eval_id=attrs.get(keys.EVAL),
        schedule_id=attrs.get(keys.SCHEDULED_BY),
        forked_from=attrs.get(keys.FORKED_FROM),
        priority=wf.raw_info.priority.priority_key or None,
        agent=metadata.get(AGENT_METADATA_KEY),
        worker_version=worker_version_of(wf),
    )


def worker_version_of(wf: WorkflowExecution) -> str | None:
    """The Worker Deployment version (``deployment:build``) the execution is pinned to, as
    Temporal's TemporalWorkerDeploymentVersion spells it; None for an unversioned one."""
    version = wf.raw_info.versioning_info.deployment_version
    if version.build_id:
        return f"{version.deployment_name}:{version.build_id}"
    value = wf.search_attributes.get(WORKER_VERSION_ATTRIBUTE)
    return str(value[0]) if value else None
