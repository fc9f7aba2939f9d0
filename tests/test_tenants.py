"""Tenants, roles and accountable approvals over real HTTP against a real dev server and worker:
another tenant's task answers 404 exactly like a missing one and is left untouched, a key without
a role gets 403, approvals record the authenticated identity (the key's name, a Temporal update's
caller identity), an approver may edit a tool call's arguments (checked by the guards again, run
once with them, both recorded), and the audit lists who did what."""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from temporalio.client import Client as TemporalClient

from noeta.client.audit import audit_of
from noeta.client.client import AsyncClient
from noeta.client.connection import Connection
from noeta.client.options import Options, SubAgent
from noeta.client.projection import project
from noeta.errors import ConfigurationError
from noeta.http import create_app
from noeta.sdk.testing import FakeLLMProvider
from noeta.security.api_keys import ALL_ROLES, ApiKey, parse_key_lines
from noeta.security.http_guard import GuardConfig
from tests.support.asgi import serving
from tests.support.inbox import inbox, wire_task
from tests.support.scripts import call, say
from tests.support.waiting import eventually
from tests.test_guards import AmountGuard, runs, wire_money
from tests.test_projection import events

ALICE = "alice-secret-" + "a1" * 12  # acme: may do everything but admin
BOB = "bob-secret-" + "b2" * 12  # globex: the other tenant, with every role
CAROL = "carol-secret-" + "c3" * 12  # acme, read only
KEYS_FILE = f"""# operators
{ALICE} alice acme read,start,approve,inject
{BOB} bob globex admin
{CAROL} carol acme read
"""


def auth(secret: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


def test_key_file_lines():
    alice, bob, carol = parse_key_lines(KEYS_FILE)
    assert (alice.name, alice.tenant, sorted(alice.roles)) == ("alice", "acme", ["approve", "inject", "read", "start"])
    assert (bob.tenant, bob.roles, carol.roles) == ("globex", frozenset({"admin"}), frozenset({"read"}))
    [legacy] = parse_key_lines(ALICE + "\n")  # a secret alone: every role, the default tenant
    assert (legacy.tenant, legacy.roles, legacy.name) == ("default", ALL_ROLES, legacy.id)
    for bad, why in [
        (f"{ALICE} alice acme read,fly", "unknown role"),
        (f"{ALICE} alice acme", "SECRET NAME TENANT"),
        ("short alice acme read", "at least 16"),
        (f"{ALICE} alice ac'me read", "tenant"),
        (f"{ALICE} alice acme read\n{ALICE} bob acme read", "appears twice"),
        (f"{ALICE} alice acme read\n{BOB} alice acme read", "name appears twice"),
    ]:
        with pytest.raises(ConfigurationError, match=why):
            parse_key_lines(bad)
    assert ALICE not in repr(ApiKey(ALICE, "alice"))


async def test_keys_file_is_read_again_when_it_changes(client: AsyncClient, tmp_path: Path, caplog):
    path = tmp_path / "keys"
    path.write_text(KEYS_FILE)
    app = create_app(client, guard=GuardConfig(keys_file=path))
    async with serving(app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        assert (await http.get("/tasks", headers=auth(ALICE))).status_code == 200
        assert (await http.get("/tasks", headers=auth("dave-secret-" + "d4" * 12))).status_code == 401
        path.write_text(f"{BOB} bob globex admin\n{'dave-secret-' + 'd4' * 12} dave acme read\n")  # alice revoked
        assert (await http.get("/tasks", headers=auth(ALICE))).status_code == 401
        assert (await http.get("/tasks", headers=auth("dave-secret-" + "d4" * 12))).status_code == 200
        with caplog.at_level(logging.ERROR, logger="noeta.security.api_keys"):
            path.write_text(f"{BOB} bob globex admin,fly\n")  # a typo: the keys read before stay
            assert (await http.get("/tasks", headers=auth(BOB))).status_code == 200
        assert "unknown role" in caplog.text


@pytest.fixture
async def tenants(client: AsyncClient, tmp_path: Path):
    path = tmp_path / "keys"
    path.write_text(KEYS_FILE)
    app = create_app(client, keepalive_seconds=0.2, guard=GuardConfig(keys_file=path))
    async with serving(app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        yield http


async def test_another_tenants_task_is_missing_and_untouched_and_roles_are_enforced(
    tenants: httpx.AsyncClient, client: AsyncClient, serve, task_queue
):
    runs.clear()
    provider = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": 2500})), say("paid")])
    word = f"acmepay{task_queue[2:]}"
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        body = wire_task(f"Pay {word}", task_queue)
        assert (await tenants.post("/tasks", json=body, headers=auth(CAROL))).status_code == 403  # read only
        response = await tenants.post("/tasks", json=body, headers=auth(ALICE))
        assert response.status_code == 201, response.text
        task_id = response.json()["task_id"]
        # The same start under another tenant's key does not hand it the task.
        taken = await tenants.post("/tasks", json={**body, "task_id": task_id}, headers=auth(BOB))
        assert (taken.status_code, taken.json()["error"]) == (409, "TaskAlreadyExistsError")

        await eventually(lambda: inbox(tenants, auth(ALICE), task_id))
        [pending] = await inbox(tenants, auth(ALICE), task_id)
        request = pending["request"]
        assert (request["call_id"], request["guard"], request["reason"]) == ("c1", "amount", "wire of 2500 needs a human")
        assert request["action"]["risk_level"] == "high"
        assert request["waiting_since"] < request["deadline"]
        assert await inbox(tenants, auth(BOB), task_id) == []

        # Everything Bob (another tenant, every role) tries answers as for a task that does not exist.
        missing = "no-such-task-" + task_queue
        attempts = [
            ("GET", "/tasks/{}", None), ("GET", "/tasks/{}/messages", None), ("GET", "/tasks/{}/approvals", None),
            ("POST", "/tasks/{}/approvals", {"call_id": "c1"}), ("POST", "/tasks/{}/inject", {"text": "pay me"}),
            ("GET", "/tasks/{}/events?follow=false", None), ("GET", "/tasks/{}/deltas", None),
            ("GET", "/tasks/{}/audit", None), ("POST", "/tasks/{}/cancel", None), ("POST", "/tasks/{}/close", None),
            ("POST", "/tasks/{}/fork", {"at_turn": 1}), ("POST", "/tasks/{}/goals", {"goal": "more"}),
        ]
        for method, path, json_body in attempts:
            theirs = await tenants.request(method, path.format(task_id), json=json_body, headers=auth(BOB))
            absent = await tenants.request(method, path.format(missing), json=json_body, headers=auth(BOB))
            assert theirs.status_code == absent.status_code == 404, (path, theirs.text)
            assert theirs.json() == {**absent.json(), "message": absent.json()["message"].replace(missing, task_id)}
        # Carol (acme, read only) sees the task but may not answer it.
        assert (await tenants.get(f"/tasks/{task_id}", headers=auth(CAROL))).status_code == 200
        refused = await tenants.post(f"/tasks/{task_id}/approvals", json={"call_id": "c1"}, headers=auth(CAROL))
        assert (refused.status_code, refused.json()["error"]) == (403, "Forbidden")
        assert (await tenants.post(f"/tasks/{task_id}/inject", json={"text": "x"}, headers=auth(CAROL))).status_code == 403
        # Nothing changed: the action still waits, nothing was injected or answered.
        assert [r.call_id for r in await client.pending_approvals(task_id)] == ["c1"]
        types = [e.type for e in await client.events(task_id)]
        assert "ApprovalGranted" not in types and "ApprovalDenied" not in types
        assert not [e for e in await client.audit(task_id) if e.action != "started"]

        async def listed(secret: str) -> list[str]:
            tasks = (await tenants.get("/tasks", params={"search": word}, headers=auth(secret))).json()
            return [t["task_id"] for t in tasks]

        await eventually(lambda: listed(ALICE))
        assert await listed(ALICE) == [task_id] and await listed(BOB) == []
        assert (await tenants.get(f"/tasks/{task_id}", headers=auth(ALICE))).json()["tenant"] == "acme"

        # Alice injects context, then approves with the amount edited down.
        assert (await tenants.post(f"/tasks/{task_id}/inject", json={"text": "invoice 7"}, headers=auth(ALICE))).status_code == 202
        answer = {"call_id": "c1", "reason": "split the wire", "arguments": {"amount": 900}}
        assert (await tenants.post(f"/tasks/{task_id}/approvals", json=answer, headers=auth(ALICE))).status_code == 202
        assert (await client.result(task_id)).answer == "paid"
    assert runs == [{"amount": 900}]  # the edited arguments, exactly once
    events = await client.events(task_id)
    [granted] = [e.payload for e in events if e.type == "ApprovalGranted"]
    assert (granted.approver, granted.via, granted.reason) == ("alice", "key", "split the wire")
    assert (granted.proposed_arguments, granted.arguments) == ({"amount": 2500}, {"amount": 900})
    assert granted.waited_seconds is not None and granted.waited_seconds >= 0
    [proposed] = [e.payload for e in events if e.type == "ToolCallProposed"]
    [started] = [e.payload for e in events if e.type == "ToolCallStarted"]
    assert (proposed.arguments, started.arguments) == ({"amount": 2500}, {"amount": 900})
    assert [e.payload.verdict for e in events if e.type == "GuardVerdict" and e.payload.call_id == "c1"] == ["ask", "allow"]

    audit = (await tenants.get(f"/tasks/{task_id}/audit", headers=auth(CAROL))).json()
    assert [(a["action"], a["who"], a["via"]) for a in audit] == [
        ("started", "alice", "key"), ("injected", "alice", "key"), ("edited", "alice", "key"),
    ]
    assert audit[2]["call_id"] == "c1" and audit[2]["detail"] == '{"amount": 900}'
    assert audit[1]["detail"] == "[system] invoice 7"


async def test_an_approval_sent_as_a_temporal_update_records_the_callers_identity(
    client: AsyncClient, serve, task_queue
):
    runs.clear()
    provider = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": 2500})), say("paid")])
    options = Options(provider=provider, allowed_tools=[wire_money], guards=[AmountGuard()])
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        task_id = await client.start("pay", options, task_queue=task_queue)
        await eventually(lambda: client.pending_approvals(task_id))
        # As the Temporal UI or `temporal workflow update` would: a client of Temporal's own, whose
        # input names someone else (free text is not what the record trusts).
        ui = await TemporalClient.connect(
            client.temporal.service_client.config.target_host, namespace=client.temporal.namespace,
            identity="ops-bob@corp",
        )
        await ui.get_workflow_handle(task_id).execute_update("approve", {"call_id": "c1", "approved": True, "approver": "mallory"})
        assert (await client.result(task_id)).answer == "paid"
    assert runs == [{"amount": 2500}]
    [granted] = [e.payload for e in await client.events(task_id) if e.type == "ApprovalGranted"]
    assert (granted.approver, granted.via, granted.arguments) == ("ops-bob@corp", "temporal", None)
    assert [(a.action, a.who, a.via) for a in await client.audit(task_id)][1:] == [("approved", "ops-bob@corp", "temporal")]


async def test_an_edited_call_the_guards_deny_does_not_run(client: AsyncClient, serve, task_queue):
    runs.clear()
    provider = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": 2500})), say("not paid")])
    options = Options(provider=provider, allowed_tools=[wire_money], guards=[AmountGuard()])
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        task_id = await client.start("pay", options, task_queue=task_queue)
        await eventually(lambda: client.pending_approvals(task_id))
        with pytest.raises(ConfigurationError, match="only .* with an approval"):
            await client.approve(task_id, "c1", approved=False, arguments={"amount": 1})
        await client.approve(task_id, "c1", approver="user:root", arguments={"amount": 5_000_000})
        assert (await client.result(task_id)).answer == "not paid"
    assert runs == []  # above the guard's hard limit: refused on the second look
    events = await client.events(task_id)
    [refused] = [e.payload for e in events if e.type == "ToolCallRefused"]
    assert (refused.arguments, refused.reason) == ({"amount": 5_000_000}, "Denied by guard 'amount': amount above the hard limit")
    [granted] = [e.payload for e in events if e.type == "ApprovalGranted"]
    assert (granted.approver, granted.via, granted.arguments) == ("root", "user", {"amount": 5_000_000})


def test_the_recorded_edited_approvals_project_both_argument_sets_and_the_audit():
    history = events("edited-approvals/edited_approvals")
    envs = project(history)
    granted = {e.payload.call_id: e.payload for e in envs if e.type == "ApprovalGranted"}
    assert {c: (g.approver, g.via, g.proposed_arguments, g.arguments) for c, g in granted.items()} == {
        "c1": ("alice", "user", {"amount": 2500}, {"amount": 900}),
        "c2": ("alice", "user", {"amount": 3000}, {"amount": 5_000_000}),
    }
    assert [e.payload.arguments for e in envs if e.type == "ToolCallStarted"] == [{"amount": 900}]
    [refused] = [e.payload for e in envs if e.type == "ToolCallRefused"]
    assert (refused.call_id, refused.arguments) == ("c2", {"amount": 5_000_000})
    assert [e.type for e in envs].count("ApprovalRequested") == 2  # the second look waits for nobody
    assert [(a.action, a.who, a.call_id) for a in audit_of(history)][1:] == [("edited", "alice", "c1"), ("edited", "alice", "c2")]


def test_the_audit_of_a_recorded_refusal_sent_as_the_refuse_update():
    history = events("refuse-update/refusals")
    decided = [(a.action, a.call_id, a.via) for a in audit_of(history) if a.call_id]
    assert ("denied", "c3", "temporal") in decided and ("approved", "c4", "temporal") in decided


@pytest.mark.server
async def test_tenants_need_the_tenant_attribute_on_the_cluster(tmp_path):
    """A cluster from before NoetaTenant (only the first release's attributes): serving keys with
    tenants, or starting a task of a tenant, is refused; the default tenant still works."""
    import subprocess

    from noeta.client.config import Settings
    from noeta.client.embedded import free_port, temporal_binary
    from noeta.client.host import HostConfig
    from noeta.context.content_store import LocalContentStore
    from noeta.http import serve
    from noeta.protocols.names import BASE_SEARCH_ATTRIBUTES, SA_TENANT, SEARCH_ATTRIBUTES

    port = free_port()
    old = subprocess.Popen(
        [temporal_binary(), "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
         "--db-filename", str(tmp_path / "old.db"), "--log-level", "error",
         *[a for name in BASE_SEARCH_ATTRIBUTES for a in ("--search-attribute", f"{name}={SEARCH_ATTRIBUTES[name]}")]],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        client = await AsyncClient.connect(HostConfig(
            settings=Settings(temporal_address=f"127.0.0.1:{port}", home=tmp_path), content_store=LocalContentStore(tmp_path / "c"),
        ))
        assert not await client.has_attribute(SA_TENANT)
        keys = tmp_path / "keys"
        keys.write_text(f"{ALICE} alice acme read\n")
        with pytest.raises(ConfigurationError, match="noeta setup"):
            await serve(client, "127.0.0.1", free_port(), guard=GuardConfig(keys_file=keys))
        with pytest.raises(ConfigurationError, match=SA_TENANT):
            await client.start("x", tenant="acme", task_queue="nobody-polls")
        with pytest.raises(ConfigurationError, match=SA_TENANT):
            await client.list_tasks(tenant="acme")
        await client.list_tasks(tenant="default")  # every task of such a cluster is the default tenant's
        task_id = await client.start("x", tenant="default", task_queue="nobody-polls")
        await client.cancel(task_id)
    finally:
        old.terminate()
        old.wait(30)


async def test_a_sub_agent_belongs_to_its_root_tasks_tenant(client: AsyncClient, serve, task_queue):
    """A sub-agent's tenant is its root task's: it carries the root's NoetaTenant, so that tenant's
    list shows it, and no other tenant's list (the default one's included) does."""
    helper = SubAgent("helper", "Answers a sub-question.", Options())

    def responder(request):
        if "/sub/" in request.metadata["task_id"]:
            return say("forty-two")
        done = [b for m in request.messages for b in m.content if getattr(b, "type", "") == "tool_result"]
        return say("done") if done else call(("h1", "helper", {"goal": "what is six times seven?"}))

    provider = FakeLLMProvider(responder=responder)
    word = f"rooted{task_queue[2:]}"
    async with serve(providers=[provider]):
        task_id = await client.start(f"ask {word}", Options(provider=provider, subagents=[helper]), task_queue=task_queue,
                                     tenant="acme")
        assert (await client.result(task_id)).answer == "done"
    child_id = f"{task_id}/sub/h1"
    assert await Connection(client.temporal).tenant_of(child_id) == "acme"

    async def everything() -> set[str]:
        return {t.task_id for t in await client.list_tasks(limit=1000)}

    async def both_listed() -> bool:
        return {task_id, child_id} <= await everything()

    await eventually(both_listed)
    default = {t.task_id for t in await client.list_tasks(limit=1000, tenant="default")}
    acme = {t.task_id for t in await client.list_tasks(limit=1000, tenant="acme")}
    assert {task_id, child_id} <= acme and not {task_id, child_id} & default


async def test_a_sub_agents_approval_waits_in_its_tenants_inbox(
    tenants: httpx.AsyncClient, client: AsyncClient, serve, task_queue
):
    """The parent's guards watch its sub-agents: a sub-agent's wire waits for a human, who finds it
    in the root task's tenant's approvals inbox (the console's), nowhere else, and answers it at
    the sub-agent's own URL (its id, ``/sub/`` and all, percent-encoded as the console sends it)."""
    runs.clear()
    payer = SubAgent("payer", "Pays an invoice.", Options(allowed_tools=[wire_money]))

    def responder(request):
        done = [b for m in request.messages for b in m.content if getattr(b, "type", "") == "tool_result"]
        if "/sub/" in request.metadata["task_id"]:
            return say("wired") if done else call(("w1", "wire_money", {"amount": 2500}))
        return say("done") if done else call(("p1", "payer", {"goal": "pay invoice 7"}))

    provider = FakeLLMProvider(responder=responder)
    options = Options(provider=provider, subagents=[payer], guards=[AmountGuard()])
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        task_id = await client.start("pay through the payer", options, task_queue=task_queue, tenant="acme")
        child_id = f"{task_id}/sub/p1"

        async def waiting(tenant: str) -> list[str]:
            return [p.task_id for p in await client.approvals_waiting(1000, tenant=tenant) if p.task_id.startswith(task_id)]

        await eventually(lambda: waiting("acme"))
        assert await waiting("acme") == [child_id]
        assert await waiting("default") == []
        assert [p["task_id"] for p in await inbox(tenants, auth(ALICE), child_id)] == [child_id]
        child_url = f"/tasks/{quote(child_id, safe='')}"
        assert (await tenants.get(child_url, headers=auth(BOB))).json()["error"] == "TaskNotFoundError"
        assert (await tenants.get(child_url, headers=auth(ALICE))).json()["task_id"] == child_id
        [pending] = (await tenants.get(f"{child_url}/approvals", headers=auth(ALICE))).json()
        assert pending["call_id"] == "w1"
        answered = await tenants.post(f"{child_url}/approvals", json={"call_id": "w1"}, headers=auth(ALICE))
        assert answered.status_code == 202, answered.text
        assert (await client.result(task_id)).answer == "done"
    assert runs == [{"amount": 2500}]
    [granted] = [e.payload for e in await client.events(child_id) if e.type == "ApprovalGranted"]
    assert (granted.approver, granted.via) == ("alice", "key")


async def test_the_inbox_lists_the_longest_waiting_first(tenants: httpx.AsyncClient, client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responder=lambda request: (
        say("ok") if any(getattr(b, "type", "") == "tool_result" for m in request.messages for b in m.content)
        else call(("c1", "wire_money", {"amount": 2500}))
    ))
    body = wire_task("pay", task_queue)

    async def waiting() -> list[str]:
        return [p["task_id"] for p in await inbox(tenants, auth(ALICE), *started)]

    started: list[str] = []
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        for _ in range(2):  # the second starts once the first waits
            started.append((await tenants.post("/tasks", json=body, headers=auth(ALICE))).json()["task_id"])
            await eventually(lambda: _all_waiting(waiting, len(started)))
        assert await waiting() == started  # the task list is newest first; the inbox oldest first
        for task_id in started:
            await client.approve(task_id, "c1", approver="user:ana")
            await client.result(task_id)


async def _all_waiting(waiting, count: int) -> bool:
    return len(await waiting()) == count
