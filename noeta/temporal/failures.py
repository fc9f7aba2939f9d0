"""Failures as the Temporal UI shows them: a task that fails with one of Noeta's typed errors reads
as that error's message and type, without the SDK's stack trace under it.

The UI's Result pane (and each failed step's event) shows a failure's ``message`` and
``stack_trace`` fields. For Noeta's own errors the stack trace only lists workflow and SDK frames
(the failure was decided, not crashed into), so it is left out: of the task's failure, of the
Temporal wrappers along its cause chain (the failed activity or child), and of an activity's own
typed error. A bug's exception (any other type, a user's tool included) keeps its traceback: that
is where it helps. Failures are not compared when a history replays, so this changes no task's
replay.
"""

from __future__ import annotations

from temporalio.api.failure.v1 import Failure
from temporalio.converter import DefaultFailureConverter, PayloadConverter
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, ChildWorkflowError

import noeta.errors
from noeta.errors import NoetaError

#: The ``type`` of every error class Noeta defines (noeta.errors), read from the classes.
NOETA_ERROR_TYPES = frozenset(
    name for name, value in vars(noeta.errors).items() if isinstance(value, type) and issubclass(value, NoetaError)
)


def decided(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure Noeta decided (its stack trace says nothing): one of its typed
    errors, or a Temporal wrapper around a failed step."""
    if isinstance(exc, ApplicationError):
        return exc.type in NOETA_ERROR_TYPES
    return isinstance(exc, (NoetaError, ActivityError, ChildWorkflowError, CancelledError))


class ReadableFailureConverter(DefaultFailureConverter):
    """Temporal's failure converter, without the stack traces of :func:`decided` failures."""

    def to_failure(self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure) -> None:
        """The failure of ``exception``; the decided ones along its cause chain lose their
        traceback first (so a sealed failure holds none either)."""
        link: BaseException | None = exception
        while link is not None:
            if decided(link):
                link.__traceback__ = None  # the exception is on its way out of the workflow or activity
            link = link.__cause__
        super().to_failure(exception, payload_converter, failure)


__all__ = ["NOETA_ERROR_TYPES", "ReadableFailureConverter", "decided"]
