"""``POST /threads/{thread_id}/messages``: a message to a conversation thread, its keep-open task
started if it does not exist (``Client.send``, one Update-with-Start request), answered with the
goal's result. The thread belongs to the key's tenant: another tenant's thread answers 404, as a
task of another tenant does."""

from __future__ import annotations

from fastapi import APIRouter

from noeta.errors import TaskNotFoundError
from noeta.http import models
from noeta.http.bodies import BoundedRoute
from noeta.http.openapi import AUTHENTICATED, answers
from noeta.http.routes import KeyId, State, _non_empty
from noeta.http.task_paths import TASK_ID
from noeta.http.tenancy import Starter, identity, own_task
from noeta.protocols.task import TaskResult

threads = APIRouter(dependencies=AUTHENTICATED, route_class=BoundedRoute)


@threads.post(
    f"/threads/{{thread_id:{TASK_ID}}}/messages", tags=["tasks"],
    summary="Send a message to a conversation thread, starting its task if needed (waits for the answer)",
    responses=answers(401, 404, 409, 413, 422, 429),
)
async def send_message(thread_id: str, body: models.ThreadMessage, state: State, key: KeyId, who: Starter) -> TaskResult:
    """Send the message to the thread's keep-open task (started with the body's options if there
    is none) and wait for the answer. The same ``request_id`` again starts no second task and sends
    nothing twice. ``if_busy``: what the message does while the thread works on another."""
    try:
        await own_task(state.client, who, thread_id)
    except TaskNotFoundError:
        pass  # a new thread, or another tenant's: its task refuses a message of this tenant (404)
    options = (body.options or models.TaskOptions()).to_options()
    options = state.quotas.cap(options, await state.quotas.admit(state.client, key))
    result = await state.client.send(
        thread_id, body.message, options, request_id=body.request_id, if_busy=body.if_busy,
        task_queue=_non_empty(body.task_queue, "task_queue"), api_key_id=key, tenant=who.tenant,
        identity=identity(who),
    )
    return result


__all__ = ["threads"]
