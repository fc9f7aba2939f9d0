"""What the outside sees of a run while it works: its search attributes (each upsert is a command,
recorded in history) and the "Current Details" of its Temporal UI page (not recorded)."""

from __future__ import annotations

from noeta.protocols.statuses import TaskStatus
from noeta.workflows import details
from noeta.workflows.approvals import Approvals
from noeta.workflows.index import SearchIndex
from noeta.workflows.run import RunState


class RunStatus:
    """The run's search attributes and Current Details, kept current from the run's state and the
    approvals waiting for a human (shown on top: they are what a person can act on)."""

    def __init__(self, run: RunState, approvals: Approvals) -> None:
        """Reports the status of ``run`` (search attributes, current details), pending ``approvals``
        included."""
        task = run.task
        self._run = run
        self._approvals = approvals
        self._index = SearchIndex(task.index, task.index_cost, task.index_interval_seconds)
        self._details = details.CurrentDetails()

    def update_index(self, status: TaskStatus | None = None) -> None:
        """Refresh the search attributes; with ``status`` (the task's new status) always upserted,
        without it only when the refresh interval allows (see SearchIndex)."""
        run = self._run
        # The resolved model rides on upserts that happen anyway (no extra history event).
        model = run.state.model if run.task.model is None or run.state.provider_index else None
        self._index.update(run.state.total_turns, run.state.usage, status, model=model)

    def waiting(self) -> None:
        """An approval (or a server's question) was just listed: the task awaits a person."""
        self.update_index("awaiting_approval")
        self.refresh()

    def settled(self) -> None:
        """An approval was answered or withdrawn: the task runs again once none is pending."""
        if not self._approvals.pending:
            self.update_index("running")
        self.refresh()

    def show(self, text: str) -> None:
        """What the run is doing now (a line of ``details``)."""
        self._details.doing(text, self._approvals.pending, self._run.task.approval_timeout_seconds)

    def outage(self, text: str) -> None:
        """The content store fails under the current step (``text`` says how); shown until the next
        step."""
        self._details.outage(text, self._approvals.pending, self._run.task.approval_timeout_seconds)

    def refresh(self) -> None:
        """Show the approvals waiting now above what the run is doing."""
        self._details.refresh(self._approvals.pending, self._run.task.approval_timeout_seconds)
