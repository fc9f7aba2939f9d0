"""Listing tasks from the cluster's visibility store, and linking to a task's page in the Temporal
UI."""

from __future__ import annotations

from urllib.parse import quote

from noeta.client.connection import Connection
from noeta.client.visibility import TaskFilter, TaskSummary, summary_of, task_query
from noeta.errors import TaskNotFoundError
from noeta.protocols.names import SUBTASK_SEPARATOR


class TaskListing:
    """The tasks on a connection's cluster, as its visibility store sees them, and their UI links
    (``ui_url``: the Temporal UI's address, None when not known)."""

    def __init__(self, connection: Connection, ui_url: str | None = None) -> None:
        """``ui_url``: the Temporal UI's address, if there is one."""
        self.connection = connection
        self.ui_url = ui_url
        """The Temporal UI's address, for task links (``task_url``)."""

    async def list_tasks(self, wanted: TaskFilter, limit: int = 50) -> list[TaskSummary]:
        """At most ``limit`` tasks that ``wanted`` keeps, newest first, through a visibility query
        built for the search attributes the cluster has."""
        query = task_query(await self.connection.registered_attributes(), wanted)
        found = [summary_of(wf) async for wf in self.connection.temporal.list_workflows(query, limit=limit)]
        tenant = wanted.tenant
        if tenant is None:
            return found
        # A sub-agent's tenant is its root's. Sub-agents started before they carried their root's
        # NoetaTenant have none (they match the default tenant's query): the root's is asked.
        return [s for s in found if SUBTASK_SEPARATOR not in s.task_id or await self._root_tenant(s.task_id) == tenant]

    async def _root_tenant(self, task_id: str) -> str | None:
        try:
            return await self.connection.tenant_of(task_id)
        except TaskNotFoundError:
            return None

    def task_url(self, task_id: str) -> str | None:
        """The task's page in the Temporal UI (None when the UI's address is not known)."""
        if not self.ui_url:
            return None
        namespace = quote(self.connection.namespace)
        return f"{self.ui_url.rstrip('/')}/namespaces/{namespace}/workflows/{quote(task_id, safe='')}"
