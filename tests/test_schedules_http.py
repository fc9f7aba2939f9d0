"""Schedules over real HTTP with tenants' keys, against the dev server and a real worker: a
tenant's key creates, lists, triggers, pauses and deletes its own schedules, whose runs are that
tenant's tasks carrying the schedule's id; another tenant's key sees none of it (404 exactly as
for a schedule that does not exist, absent from lists); a read-only key cannot change them."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.http import create_app
from noeta.security.http_guard import GuardConfig
from tests.support.asgi import serving
from tests.support.waiting import eventually
from tests.test_schedules import answering, new_id
from tests.test_tenants import ALICE, BOB, CAROL, KEYS_FILE, auth


@pytest.fixture
async def http(client: AsyncClient, tmp_path: Path):
    path = tmp_path / "keys"
    path.write_text(KEYS_FILE)
    app = create_app(client, guard=GuardConfig(keys_file=path))
    async with serving(app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as session:
        yield session


async def _ids(http: httpx.AsyncClient, secret: str) -> set[str]:
    response = await http.get("/schedules", headers=auth(secret))
    assert response.status_code == 200, response.text
    return {s["schedule_id"] for s in response.json()}


async def _runs(http: httpx.AsyncClient, secret: str, schedule_id: str) -> list[dict]:
    response = await http.get("/tasks", headers=auth(secret))
    return [t for t in response.json() if t["schedule_id"] == schedule_id]


async def test_a_tenants_schedules_are_its_own(http: httpx.AsyncClient, client: AsyncClient, serve, task_queue: str):
    schedule_id = new_id("http")
    body = {"schedule_id": schedule_id, "goal": "Triage the acme inbox", "every": "10s", "task_queue": task_queue,
            "overlap": "buffer_one", "catchup_window": 600}
    async with serve(providers={"default": answering()}):
        assert (await http.post("/schedules", json=body, headers=auth(CAROL))).status_code == 403  # read only
        refused = await http.post("/schedules", json={**body, "cron": "0 8 * * *"}, headers=auth(ALICE))
        assert (refused.status_code, refused.json()["error"]) == (422, "ConfigurationError")
        assert "exactly one of cron" in refused.json()["message"]
        created = await http.post("/schedules", json=body, headers=auth(ALICE))
        assert (created.status_code, created.json()) == (201, {"schedule_id": schedule_id}), created.text
        taken = await http.post("/schedules", json=body, headers=auth(BOB))  # one namespace of ids
        assert (taken.status_code, taken.json()["error"]) == (409, "ScheduleAlreadyExistsError")

        try:
            shown = (await http.get(f"/schedules/{schedule_id}", headers=auth(CAROL))).json()
            assert (shown["goal"], shown["timing"], shown["overlap"], shown["tenant"]) == (
                "Triage the acme inbox", "every 10s", "buffer_one", "acme")
            assert shown["catchup_window_seconds"] == 600 and len(shown["next_runs"]) == 5
            await eventually(lambda: _listed(http, ALICE, schedule_id), timeout=10, interval=0.2)
            assert schedule_id not in await _ids(http, BOB)

            # Everything the other tenant tries answers as for a schedule that does not exist.
            missing = new_id("missing")
            for method, path, json_body in [
                ("GET", "/schedules/{}", None), ("POST", "/schedules/{}/pause", {"note": "mine now"}),
                ("POST", "/schedules/{}/unpause", None), ("POST", "/schedules/{}/trigger", None),
                ("POST", "/schedules/{}/backfill", {"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"}),
                ("DELETE", "/schedules/{}", None),
            ]:
                theirs = await http.request(method, path.format(schedule_id), json=json_body, headers=auth(BOB))
                absent = await http.request(method, path.format(missing), json=json_body, headers=auth(BOB))
                assert theirs.status_code == absent.status_code == 404, (path, theirs.text)
                assert theirs.json() == {**absent.json(), "message": absent.json()["message"].replace(missing, schedule_id)}
                if method != "GET":
                    assert (await http.request(method, path.format(schedule_id), json=json_body,
                                               headers=auth(CAROL))).status_code == 403
            assert not (await client.describe_schedule(schedule_id)).paused

            # A trigger starts a run at once: a task of acme carrying the schedule's id.
            triggered = await http.post(f"/schedules/{schedule_id}/trigger", json={"overlap": "allow_all"},
                                        headers=auth(ALICE))
            assert triggered.status_code == 202, triggered.text
            await eventually(lambda: _completed_run(http, schedule_id), timeout=20, interval=0.3)
            [run, *_] = [t for t in await _runs(http, ALICE, schedule_id) if t["status"] == "completed"]
            assert run["tenant"] == "acme" and run["task_id"].startswith(f"{schedule_id}-")
            assert await _runs(http, BOB, schedule_id) == []
            assert (await http.get(f"/tasks/{run['task_id']}", headers=auth(BOB))).status_code == 404
            shown = (await http.get(f"/schedules/{schedule_id}", headers=auth(ALICE))).json()
            assert run["task_id"] in {r["task_id"] for r in shown["recent_runs"]}

            paused = await http.post(f"/schedules/{schedule_id}/pause", json={"note": "migration"}, headers=auth(ALICE))
            assert paused.status_code == 200, paused.text
            shown = (await http.get(f"/schedules/{schedule_id}", headers=auth(ALICE))).json()
            assert (shown["paused"], shown["note"], shown["next_runs"]) == (True, "migration", [])
            assert (await http.post(f"/schedules/{schedule_id}/unpause", headers=auth(ALICE))).status_code == 200
            assert not (await http.get(f"/schedules/{schedule_id}", headers=auth(ALICE))).json()["paused"]
        finally:
            deleted = await http.delete(f"/schedules/{schedule_id}", headers=auth(ALICE))
        assert deleted.status_code == 200, deleted.text
        assert (await http.get(f"/schedules/{schedule_id}", headers=auth(ALICE))).status_code == 404
        await eventually(lambda: _unlisted(http, ALICE, schedule_id), timeout=10, interval=0.2)


async def _listed(http: httpx.AsyncClient, secret: str, schedule_id: str) -> bool:
    return schedule_id in await _ids(http, secret)


async def _unlisted(http: httpx.AsyncClient, secret: str, schedule_id: str) -> bool:
    return schedule_id not in await _ids(http, secret)


async def _completed_run(http: httpx.AsyncClient, schedule_id: str) -> bool:
    return any(t["status"] == "completed" for t in await _runs(http, ALICE, schedule_id))


async def test_the_openapi_document_describes_the_schedule_endpoints(client: AsyncClient):
    document = create_app(client, guard=GuardConfig()).openapi()
    paths = document["paths"]
    assert set(paths["/schedules"]) == {"get", "post"}
    assert set(paths["/schedules/{schedule_id}"]) == {"get", "delete"}
    for action in ("pause", "unpause", "trigger", "backfill"):
        assert "post" in paths[f"/schedules/{{schedule_id}}/{action}"]
    schemas = document["components"]["schemas"]
    assert {"CreateSchedule", "ScheduleOut", "ScheduleRunOut", "ScheduleRef", "BackfillSchedule"} <= set(schemas)
    assert set(schemas["CreateSchedule"]["properties"]["overlap"]["enum"]) >= {"skip", "buffer_one", "allow_all", "cancel_other"}
    assert "next_runs" in schemas["ScheduleOut"]["properties"] and "task_id" in schemas["ScheduleRunOut"]["properties"]
