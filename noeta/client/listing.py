"""Listing tasks from the cluster's visibility store, and linking to a task's page in the Temporal
UI."""

from __future__ import annotations

from urllib.parse import quote

from noeta.client.connection import Connection
from noeta.client.visibility import TaskSummary, summary_of, task_query


class TaskListing:
    """The tasks on a connection's cluster, as its visibility store sees them, and their UI links
    (``ui_url``: the Temporal UI's address, None when not known)."""

    def __init__(self, connection: Connection, ui_url: str | None = None) -> None:
        """``ui_url``: the Temporal UI's address, if there is one."""
        self.connection = connection
        self.ui_url = ui_url
        """The Temporal UI's address, for task links (``task_url``)."""

    async def list_tasks(
        self,
        status: str | None = None,
        limit: int = 50,
        *,
        search: str | None = None,
        model: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> list[TaskSummary]:
        """Tasks matching the filters, newest first, through a visibility query built for the
        search attributes the cluster has."""
        query = task_query(await self.connection.registered_attributes(), status, search, model, metadata)
        return [summary_of(wf) async for wf in self.connection.temporal.list_workflows(query, limit=limit)]

    def task_url(self, task_id: str) -> str | None:
        """The task's page in the Temporal UI (None when the UI's address is not known)."""
        if not self.ui_url:
            return None
        namespace = quote(self.connection.namespace)
        return f"{self.ui_url.rstrip('/')}/namespaces/{namespace}/workflows/{quote(task_id, safe='')}"
