"""Task ids in URLs: the ``{task_id:task}`` path parameter, a sub-agent's id included.

A sub-agent's task id is its root task's id, ``/sub/`` and the call that started it (nested ones
repeat the pair). A client sends it percent-encoded (``%2F``, as the console does), and the
server decodes the path before routing, so a plain ``{task_id}`` (one segment) never matched it.
This parameter matches a root id followed by any ``/sub/CALL`` pairs and nothing else, so
``/tasks/{id}/approvals`` still routes to a task's approvals, whichever task it is.
"""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor

from noeta.protocols.names import SUBTASK_SEPARATOR

#: The convertor's name, as route paths use it: ``/tasks/{task_id:task}``.
TASK_ID = "task"

_SEPARATOR = SUBTASK_SEPARATOR.strip("/")


class TaskIdConvertor(Convertor[str]):
    """A root task's id (one path segment), then any ``/sub/CALL`` pairs."""

    regex = f"[^/]+(?:/{_SEPARATOR}/[^/]+)*"

    def convert(self, value: str) -> str:
        """The task id as it is (the path was decoded already)."""
        return value

    def to_string(self, value: str) -> str:
        """The task id as a path part."""
        return value


register_url_convertor(TASK_ID, TaskIdConvertor())

#: The path of a task's routes: ``/tasks/{task_id}``, any task's id.
TASK_PATH = f"/tasks/{{task_id:{TASK_ID}}}"
