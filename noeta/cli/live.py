"""What ``noeta run`` shows while its task runs: progress lines from the event log (stderr) and the
model's text as it is generated (stdout, on a terminal)."""

from __future__ import annotations

import logging
import sys
import threading
from typing import TextIO

from noeta.client.client import AsyncClient
from noeta.cli.progress import Progress
from noeta.protocols.messages import StreamDelta


#: The extra temporalio puts on its "Completing activity as failed" records.
_ACTIVITY_FAILURE = "ActivityFailure"


def not_in_progress(record: logging.LogRecord) -> bool:
    """A log filter for ``noeta run``: drop temporalio's record of a failed activity attempt (a model
    or tool call that failed or timed out), which the progress lines already report from the event
    log in words (``[tool]  NAME attempt 1 failed, retrying: ...``)."""
    return getattr(record, "__temporal_error_identifier", None) != _ACTIVITY_FAILURE


class StreamPrinter:
    """Prints streamed text deltas as they arrive; a new model call, or a retried attempt, starts
    on a fresh line. Called from the worker's activity (any thread)."""

    def __init__(self, out: TextIO) -> None:
        """``out`` receives the text (stdout for ``noeta run``)."""
        self.out = out
        self.text = ""
        """The text of the latest model call so far."""
        self._current: tuple[str, int] | None = None
        self._line_open = False
        self._lock = threading.Lock()

    def on_delta(self, delta: StreamDelta) -> None:
        """Print a text delta; other kinds of delta are ignored."""
        if delta.kind != "text" or not delta.text:
            return
        with self._lock:
            key = (delta.call_id, delta.attempt)
            if key != self._current:
                self._end_line()
                self._current, self.text = key, ""
            self.text += delta.text
            self.out.write(delta.text)
            self.out.flush()
            self._line_open = not delta.text.endswith("\n")

    def end_line(self) -> None:
        """Before another line is printed on the same terminal."""
        with self._lock:
            self._end_line()

    def _end_line(self) -> None:
        if self._line_open:
            self.out.write("\n")
            self.out.flush()
            self._line_open = False


async def print_progress(client: AsyncClient, task_id: str, printer: StreamPrinter | None) -> None:
    """Each model and tool step on stderr as it happens (the task's event log, followed)."""
    progress = Progress()
    async for env in client.events(task_id, follow=True):
        for line in progress.lines(env):
            if printer is not None:
                printer.end_line()
            print(line, file=sys.stderr, flush=True)
