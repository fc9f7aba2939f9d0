"""Reading tasks: their description, what a running one is doing, the approvals it waits for, its
history, event log and messages."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError

from noeta.client.connection import Connection
from noeta.client.events import EventStream, history_events
from noeta.client.listing import TaskListing
from noeta.client.messages import ViewItem, as_messages
from noeta.client.stalls import current_stall, stall_text
from noeta.client.tasks import TaskOperations
from noeta.client.audit import AuditEntry, audit_of
from noeta.client.visibility import CLOSED_STATUS, TaskFilter, TaskInfo, summary_of
from noeta.context.content_store import ContentStore
from noeta.errors import ContentIntegrityError, ContentMissingError, NoetaError, TaskNotFoundError, TaskNotOpenError
from noeta.protocols.interaction import ApprovalRequest
from noeta.protocols.names import QUERY_PENDING_APPROVALS

#: The query the Temporal UI sends for "Current Details" (and the handlers' descriptions).
METADATA_QUERY = "__temporal_workflow_metadata"
#: How long the approvals inbox waits for one task's live workflow to answer: a task whose worker
#: is down cannot answer until one runs again, and must not hold up every other task's approvals.
INBOX_QUERY_SECONDS = 3.0


@dataclass(frozen=True)
class PendingApproval:
    """An action waiting for a human, with the task it belongs to (the approvals inbox)."""

    task_id: str
    goal: str | None
    request: ApprovalRequest


@dataclass(frozen=True)
class UnreadableTask:
    """A task a listing found but could not read, and why (its payloads are encrypted with a key
    this client lacks...)."""

    task_id: str
    error: NoetaError


class ApprovalsInbox(list[PendingApproval]):
    """The actions waiting for a human that could be read (a list, as before), and in
    ``unreadable`` the waiting tasks that could not be: a listing shows what it can and names the
    rest instead of failing whole."""

    def __init__(self, waiting: list[PendingApproval], unreadable: list[UnreadableTask]) -> None:
        """``waiting``: the readable actions, in order; ``unreadable``: the tasks left out."""
        super().__init__(waiting)
        self.unreadable = unreadable


class Inspection:
    """Reading tasks on a connection. A task's messages resolve their bodies in ``content_store``;
    an ended task's description carries its result from ``tasks``; the approvals inbox visits the
    tasks ``listing`` finds waiting. :class:`~noeta.client.client.AsyncClient` documents each read."""

    def __init__(
        self, connection: Connection, *, content_store: ContentStore, tasks: TaskOperations, listing: TaskListing
    ) -> None:
        """Reads tasks through ``connection`` and their bodies from ``content_store``; ``tasks`` answers
        results and ``listing`` the UI links."""
        self.connection = connection
        self.content_store = content_store
        self.tasks = tasks
        self.listing = listing

    async def describe(self, task_id: str) -> TaskInfo:
        """The task's summary from its workflow's description, with its result or error once ended."""
        desc = await self.connection.describe(task_id)
        summary = vars(summary_of(desc))
        if desc.status == WorkflowExecutionStatus.RUNNING:
            return TaskInfo(**summary, running=True)
        try:
            result = await self.tasks.result(task_id)
        except NoetaError as err:
            status = CLOSED_STATUS.get(desc.status, "failed") if desc.status else "failed"
            return TaskInfo(**{**summary, "status": status}, error=err)
        cost = result.usage.cost_usd or summary["cost_usd"] or None  # the result is final; visibility may lag
        return TaskInfo(**{**summary, "status": result.status, "cost_usd": cost}, result=result)

    async def current_details(self, task_id: str) -> str:
        """A running task's "Current Details", asked of a live worker; empty once ended. When the
        worker cannot run the task (its step stalled: a payload key it lacks...), what stops it."""
        description = await self.connection.describe(task_id)
        if description.status != WorkflowExecutionStatus.RUNNING:
            return ""
        # Its next step fails on the workers (a key they lack...): no worker can answer for it,
        # and the log says why.
        stall = await current_stall(self.connection.temporal, task_id, description)
        if stall is not None:
            return f"**Stalled**: {stall_text(stall)}"
        handle = self.connection.temporal.get_workflow_handle(task_id)
        try:
            metadata = await handle.query(METADATA_QUERY, result_type=WorkflowMetadata)
        except WorkflowQueryFailedError:
            return ""
        details: str = metadata.current_details
        return details

    async def pending_approvals(self, task_id: str, timeout: timedelta | None = None) -> list[ApprovalRequest]:
        """A running task's actions waiting for a human, asked of the live workflow (within
        ``timeout`` when given); none once ended."""
        if not await self.connection.is_running(task_id):
            return []
        pending: list[ApprovalRequest] = await self.connection.temporal.get_workflow_handle(task_id).query(
            QUERY_PENDING_APPROVALS, result_type=list[ApprovalRequest], rpc_timeout=timeout
        )
        return pending

    async def approvals_waiting(self, limit: int = 100, tenant: str | None = None) -> ApprovalsInbox:
        """The pending approvals of every task the listing shows as awaiting_approval (``tenant``:
        of that tenant), asked of all of them at once, the longest-waiting first; a task that does
        not answer within INBOX_QUERY_SECONDS (its worker is down) is left out until it does, and
        one whose answer cannot be read (a key this client lacks) is named in ``unreadable``."""
        tasks = await self.listing.list_tasks(TaskFilter("awaiting_approval", tenant=tenant), limit)
        answers = await asyncio.gather(*(self._answering(task.task_id) for task in tasks))
        waiting = [
            PendingApproval(task.task_id, task.goal, request)
            for task, requests in zip(tasks, answers, strict=True)
            if not isinstance(requests, NoetaError)
            for request in requests
        ]
        unreadable = [
            UnreadableTask(task.task_id, error)
            for task, error in zip(tasks, answers, strict=True)
            if isinstance(error, NoetaError)
        ]
        return ApprovalsInbox(sorted(waiting, key=lambda p: p.request.waiting_since or ""), unreadable)

    async def _answering(self, task_id: str) -> list[ApprovalRequest] | NoetaError:
        try:
            return await self.pending_approvals(task_id, timedelta(seconds=INBOX_QUERY_SECONDS))
        except (TaskNotFoundError, TaskNotOpenError, WorkflowQueryFailedError):
            return []  # answered or ended since the (lagging) list was read
        except NoetaError as err:  # its answer could not be read here (EncryptionKeyError...)
            return err
        except RPCError:
            return []  # no worker answered in time

    async def audit(self, task_id: str) -> list[AuditEntry]:
        """What people did to the task, from its history (TaskNotFoundError for an unknown task)."""
        await self.connection.describe(task_id)
        return audit_of(await self.history(task_id))

    async def history(self, task_id: str) -> list[HistoryEvent]:
        """The raw history events of every run of the task, in order."""
        return [event async for _, event in history_events(self.connection.temporal, task_id)]

    def events(self, task_id: str, after_seq: int = 0, follow: bool = False) -> EventStream:
        """The task's event log, projected from its history (live with ``follow``)."""
        return EventStream(self.connection.temporal, task_id, after_seq=after_seq, follow=follow)

    async def messages(self, task_id: str) -> list[ViewItem]:
        """The task's event log as conversation items, bodies read from the content store (each
        checked against its hash): ContentIntegrityError or ContentMissingError naming the body
        and the task when one is damaged or gone."""
        events = await self.events(task_id)
        try:
            return as_messages(events, self.content_store)
        except (ContentIntegrityError, ContentMissingError) as err:
            raise type(err)(
                f"task {task_id!r}: {err}", digest=err.digest, task_id=task_id, store=err.store
            ) from err
