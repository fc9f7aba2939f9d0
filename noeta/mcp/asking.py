"""A server's questions during one tool call (``elicitation/create``), answered from what a person
already said, else turned into the call's stop: :class:`McpInputRequiredError` carrying the
question, for the workflow to wait for a person durably.

A session serves one call at a time (noeta.mcp.connections), so a question the server sends on it
belongs to that call. The worker never keeps a call open for a person: the question stops the
call (its session is closed, which ends the server's request as a lost client would), and the
workflow makes the call again with the answers so far, which :class:`Asker` returns to the
server's questions in the order it asks them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from mcp.types import INVALID_REQUEST, ElicitRequestParams, ElicitRequestURLParams, ElicitResult, ErrorData

from noeta.errors import McpInputRequiredError
from noeta.protocols.elicitation import MAX_ELICITATIONS_PER_CALL, ElicitationAnswer


class Asker:
    """The person behind one tool call: ``answers`` given so far, in the order the server asked."""

    def __init__(self, alias: str, answers: Sequence[ElicitationAnswer] = ()) -> None:
        """``alias``: the server's; ``answers``: the person's answers to its earlier questions."""
        self.alias = alias
        self._answers = list(answers)
        self._asked = 0
        self.needs: asyncio.Future[McpInputRequiredError] = asyncio.get_running_loop().create_future()
        """Resolved with the question no answer exists for yet: the call must stop and ask."""

    async def elicit(self, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        """The answer to the server's next question, or (none yet) a stop that never answers."""
        self._asked += 1
        if self._asked <= len(self._answers):
            answer = self._answers[self._asked - 1]
            return ElicitResult(action=answer.action, content=answer.content if answer.action == "accept" else None)
        if self._asked > MAX_ELICITATIONS_PER_CALL:
            return ErrorData(code=INVALID_REQUEST, message=f"at most {MAX_ELICITATIONS_PER_CALL} questions per call")
        request: dict[str, Any] = {"server": self.alias, "message": params.message, "requested_schema": {}}
        if isinstance(params, ElicitRequestURLParams):
            request["message"] = f"{params.message}\n{params.url}"
        else:
            request["requested_schema"] = dict(params.requestedSchema)
        if not self.needs.done():
            self.needs.set_result(
                McpInputRequiredError(f"MCP server {self.alias!r} asks: {params.message}", request=request)
            )
        await asyncio.Event().wait()  # never answered: the session is closed under it
        raise AssertionError("unreachable")


async def no_caller(params: Any) -> ErrorData:
    """A question on a session with no call in flight (nobody to ask)."""
    return ErrorData(code=INVALID_REQUEST, message="no tool call is waiting for this question")


__all__ = ["Asker", "no_caller"]
