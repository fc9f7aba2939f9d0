"""Reading tasks (list, describe, current details, history, messages) and answering their
approvals."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowExecutionStatus, WorkflowQueryFailedError, WorkflowUpdateFailedError

from noeta.client.events import history_events
from noeta.client.failures import translate_failure
from noeta.client.messages import ViewItem, as_messages
from noeta.client.tasks import TaskOperations
from noeta.client.visibility import CLOSED_STATUS, TaskInfo, TaskSummary, summary_of, task_query
from noeta.errors import ConfigurationError, NoetaError, TaskNotFoundError, TaskNotOpenError
from noeta.protocols.interaction import ApprovalInput, ApprovalRequest
from noeta.protocols.names import QUERY_PENDING_APPROVALS, UPDATE_APPROVE

#: The query the Temporal UI sends for "Current Details" (and the handlers' descriptions).
METADATA_QUERY = "__temporal_workflow_metadata"


@dataclass(frozen=True)
class PendingApproval:
    """An action waiting for a human, with the task it belongs to (the approvals inbox)."""

    task_id: str
    goal: str | None
    request: ApprovalRequest


class Inspection(TaskOperations):
    """Reading tasks and answering their approvals."""

    async def list_tasks(
        self,
        status: str | None = None,
        limit: int = 50,
        *,
        search: str | None = None,
        model: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> list[TaskSummary]:
        """Tasks on the cluster, newest first. ``status`` filters on NoetaStatus (or, without the
        search attributes, on the workflow's execution status); ``search`` matches words of the
        goal; ``model`` and ``metadata`` (indexed keys) match exactly."""
        query = task_query(await self.registered_attributes(), status, search, model, metadata)
        return [summary_of(wf) async for wf in self.temporal.list_workflows(query, limit=limit)]

    async def describe(self, task_id: str) -> TaskInfo:
        """The task as it is now: its summary, and once it has ended its result or typed error."""
        desc = await self._describe(task_id)
        summary = vars(summary_of(desc))
        if desc.status == WorkflowExecutionStatus.RUNNING:
            return TaskInfo(**summary, running=True)
        try:
            result = await self.result(task_id)
        except NoetaError as err:
            status = CLOSED_STATUS.get(desc.status, "failed") if desc.status else "failed"
            return TaskInfo(**{**summary, "status": status}, error=err)
        cost = result.usage.cost_usd or summary["cost_usd"]  # the result is final; visibility may lag
        return TaskInfo(**{**summary, "status": result.status, "cost_usd": cost}, result=result)

    async def current_details(self, task_id: str) -> str:
        """What a running task is doing or waiting for (the Temporal UI's "Current Details"); a live
        worker answers, so this waits for one. Empty for a task that has ended."""
        if (await self._describe(task_id)).status != WorkflowExecutionStatus.RUNNING:
            return ""
        try:
            metadata = await self.temporal.get_workflow_handle(task_id).query(METADATA_QUERY, result_type=WorkflowMetadata)
        except WorkflowQueryFailedError:
            return ""
        details: str = metadata.current_details
        return details

    def task_url(self, task_id: str) -> str | None:
        """The task's page in the Temporal UI (None when the UI's address is not known)."""
        if not self.ui_url:
            return None
        from urllib.parse import quote

        return f"{self.ui_url.rstrip('/')}/namespaces/{quote(self.temporal.namespace)}/workflows/{quote(task_id, safe='')}"

    async def approvals_waiting(self, limit: int = 100) -> list[PendingApproval]:
        """Every action waiting for a human, across the tasks whose status is awaiting_approval."""
        waiting: list[PendingApproval] = []
        for task in await self.list_tasks("awaiting_approval", limit):
            try:
                requests = await self.pending_approvals(task.task_id)
            except (TaskNotFoundError, TaskNotOpenError, WorkflowQueryFailedError):
                continue  # answered or ended since the (lagging) list was read
            waiting += [PendingApproval(task.task_id, task.goal, r) for r in requests]
        return waiting

    async def approve(
        self,
        task_id: str,
        call_id: str,
        approved: bool = True,
        reason: str | None = None,
        approver: str | None = None,
    ) -> None:
        """Answer an action that a guard sent for approval (``approved=False`` refuses it)."""
        if not call_id or not isinstance(call_id, str):
            raise ConfigurationError("call_id must be a non-empty string")
        handle = self.temporal.get_workflow_handle(task_id)
        try:
            async with self._reaching(task_id):
                await handle.execute_update(UPDATE_APPROVE, ApprovalInput(call_id, approved, reason, approver))
        except WorkflowUpdateFailedError as err:
            raise translate_failure(err) from err

    async def pending_approvals(self, task_id: str) -> list[ApprovalRequest]:
        """Actions of a running task waiting for a human (asks the live workflow); none once the
        task has ended."""
        if (await self._describe(task_id)).status != WorkflowExecutionStatus.RUNNING:
            return []
        pending: list[ApprovalRequest] = await self.temporal.get_workflow_handle(task_id).query(
            QUERY_PENDING_APPROVALS, result_type=list[ApprovalRequest]
        )
        return pending

    async def history(self, task_id: str) -> list[HistoryEvent]:
        """The raw history events of every run of the task, in order."""
        return [event async for _, event in history_events(self.temporal, task_id)]

    async def messages(self, task_id: str) -> list[ViewItem]:
        return as_messages(await self.events(task_id), self.content_store)
