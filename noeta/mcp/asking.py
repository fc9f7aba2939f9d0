"""A server's requests back to the client during one tool call, answered from what the task already
gave, else turned into the call's stop: a question for a person (``elicitation/create``:
:class:`McpInputRequiredError`) or for the task's model (``sampling/createMessage``:
:class:`McpSamplingRequiredError`, or :class:`McpSamplingNotAllowedError` when the server's
configuration does not allow it), carrying the request for the workflow to answer durably.

A session serves one call at a time (noeta.mcp.connections), so a request the server sends on it
belongs to that call. A question may be held open for a grace period (``hold``,
noeta.activities.held_questions): a person's answer in time goes back on that request. Otherwise
the request stops the call (its session is closed, which ends the server's request as a lost
client would), and the workflow makes the call again with the answers so far, which
:class:`Asker` returns to the server's requests of each kind in the order it sends them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NoReturn

from mcp.types import (
    INVALID_REQUEST,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    ErrorData,
    TextContent,
)

from noeta.errors import McpInputRequiredError, McpSamplingNotAllowedError, McpSamplingRequiredError, McpServerError
from noeta.protocols.elicitation import MAX_ELICITATIONS_PER_CALL, ElicitationAnswer
from noeta.protocols.sampling import MAX_SAMPLES_PER_CALL, REFUSED_CODE, SampledAnswer

#: The errors that stop a call to wait for an answer (or refuse it): its session is closed.
STOPS = (McpInputRequiredError, McpSamplingRequiredError, McpSamplingNotAllowedError)
#: Asks the task for a person's answer to the call's n-th question while the server's request is
#: held open (None: none in time, the call stops): noeta.activities.held_questions.
Hold = Callable[[int, dict[str, Any]], Awaitable[ElicitationAnswer | None]]


class Asker:
    """The task behind one tool call: a person's ``answers`` and the model's ``sampled`` answers
    given so far, each in the order the server asked."""

    def __init__(
        self, alias: str, answers: Sequence[ElicitationAnswer] = (), sampled: Sequence[SampledAnswer] = (),
        *, sampling: bool = False, hold: Hold | None = None,
    ) -> None:
        """``alias``: the server's; ``answers``/``sampled``: the answers to its earlier requests;
        ``sampling``: its configuration allows sampling requests; ``hold``: a new question waits
        for it before the call stops."""
        self.alias = alias
        self._answers = list(answers)
        self._sampled = list(sampled)
        self._sampling = sampling
        self._hold = hold
        self._asked = 0
        self._samples = 0
        self.needs: asyncio.Future[McpServerError] = asyncio.get_running_loop().create_future()
        """Resolved with the request no answer exists for yet: the call must stop (and ask)."""

    @property
    def refused(self) -> bool:
        """The call fails whatever the server does next: it asked for what it may not."""
        return self.needs.done() and isinstance(self.needs.result(), McpSamplingNotAllowedError)

    async def elicit(self, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        """The answer to the server's next question, or (none yet) a stop that never answers."""
        self._asked += 1
        if self._asked <= len(self._answers):
            return _result(self._answers[self._asked - 1])
        if self._asked > MAX_ELICITATIONS_PER_CALL:
            return ErrorData(code=INVALID_REQUEST, message=f"at most {MAX_ELICITATIONS_PER_CALL} questions per call")
        request: dict[str, Any] = {"server": self.alias, "message": params.message, "requested_schema": {}, "index": self._asked}
        if isinstance(params, ElicitRequestURLParams):
            request["message"] = f"{params.message}\n{params.url}"
        else:
            request["requested_schema"] = dict(params.requestedSchema)
        held = await self._hold(self._asked, request) if self._hold is not None else None
        if held is not None:  # answered in time: on the request that asked
            return _result(held)
        return await self._stop(McpInputRequiredError(f"MCP server {self.alias!r} asks: {params.message}", request=request))

    async def sample(self, params: CreateMessageRequestParams) -> CreateMessageResult | ErrorData:
        """The task model's answer to the server's next sampling request, a refusal, or (none yet)
        a stop that never answers."""
        if not self._sampling:
            refusal = McpSamplingNotAllowedError(
                f"MCP server {self.alias!r} asked the task's model (sampling/createMessage), which its "
                f"configuration does not allow: set \"sampling\": true on mcp_servers[{self.alias!r}] to let it",
                alias=self.alias,
            )
            if not self.needs.done():
                self.needs.set_result(refusal)
            return ErrorData(code=REFUSED_CODE, message="sampling is not allowed for this server")
        self._samples += 1
        if self._samples <= len(self._sampled):
            answer = self._sampled[self._samples - 1]
            if answer.refused is not None:
                return ErrorData(code=REFUSED_CODE, message=answer.refused)
            return CreateMessageResult(
                role="assistant", content=TextContent(type="text", text=answer.text), model=answer.model or "unknown",
                stopReason=answer.stop_reason,
            )
        if self._samples > MAX_SAMPLES_PER_CALL:
            return ErrorData(code=INVALID_REQUEST, message=f"at most {MAX_SAMPLES_PER_CALL} sampling requests per call")
        request = {"server": self.alias, **params.model_dump(mode="json", by_alias=True, exclude_none=True)}
        return await self._stop(
            McpSamplingRequiredError(f"MCP server {self.alias!r} asks the task's model", request=request)
        )

    async def _stop(self, stop: McpServerError) -> NoReturn:
        if not self.needs.done():
            self.needs.set_result(stop)
        await asyncio.Event().wait()  # never answered: the session is closed under it
        raise AssertionError("unreachable")


def _result(answer: ElicitationAnswer) -> ElicitResult:
    return ElicitResult(action=answer.action, content=answer.content if answer.action == "accept" else None)


async def no_caller(params: Any) -> ErrorData:
    """A request on a session with no call in flight (nobody to ask)."""
    return ErrorData(code=INVALID_REQUEST, message="no tool call is waiting for this request")


__all__ = ["STOPS", "Asker", "no_caller"]
