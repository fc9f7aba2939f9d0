"""Over HTTP: the body of a task that wires money under the amount guard (``wire_money`` and
``AmountGuard`` of tests.test_guards, registered on the test's worker, so its first wire waits for
a human), and the approvals inbox's entries of given tasks."""

from __future__ import annotations

from typing import Any

import httpx

#: The options of such a task: the FakeLLMProvider (by its registry name), the tool and the guard.
WIRE_OPTIONS = {"provider": "FakeLLMProvider", "allowed_tools": ["wire_money"], "guards": ["amount"]}


def wire_task(goal: str, task_queue: str) -> dict[str, Any]:
    """The ``POST /tasks`` body of a task with ``goal`` on ``task_queue`` that may wire money."""
    return {"goal": goal, "task_queue": task_queue, "options": WIRE_OPTIONS}


async def inbox(http: httpx.AsyncClient, headers: dict[str, str], *task_ids: str) -> list[dict[str, Any]]:
    """The entries of ``GET /approvals`` (as ``headers`` authenticate) that belong to ``task_ids``,
    in the inbox's order (other tests' tasks share the namespace)."""
    response = await http.get("/approvals", headers=headers)
    assert response.status_code == 200, response.text
    return [p for p in response.json()["waiting"] if p["task_id"] in task_ids]
