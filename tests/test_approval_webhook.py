"""The approval webhook against a real HTTP receiver: when an action starts waiting for a human the
worker POSTs a signed notification, retried until the receiver takes it; a webhook without a
secret is refused at worker start."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from noeta.activities.webhook import DELIVERY_HEADER, SIGNATURE_HEADER, WebhookSettings
from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import ConfigurationError
from noeta.sdk.testing import FakeLLMProvider
from tests.support.http_handler import LocalHTTPServer, QuietHandler, running
from tests.support.scripts import call, say
from tests.support.waiting import eventually
from tests.test_guards import AmountGuard, runs, wire_money

SECRET = "webhook-secret-" + "7a" * 12


class Receiver:
    """Answers 503 to the first delivery and 204 to the rest; keeps every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                receiver.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_json(503 if len(receiver.requests) == 1 else 204, b"")

        self.httpd = LocalHTTPServer(Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hooks/approvals"


def verified(headers: dict[str, str], body: bytes) -> bool:
    fields = dict(part.split("=", 1) for part in headers[SIGNATURE_HEADER.lower()].split(","))
    expected = hmac.new(SECRET.encode(), f"{fields['t']}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(fields["v1"], expected)


async def test_a_waiting_action_is_notified_signed_and_retried(
    client: AsyncClient, serve, task_queue, monkeypatch: pytest.MonkeyPatch
):
    runs.clear()
    receiver = Receiver()
    monkeypatch.setenv("NOETA_APPROVAL_WEBHOOK_URL", receiver.url)
    monkeypatch.setenv("NOETA_APPROVAL_WEBHOOK_SECRET", SECRET)
    provider = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": 2500})), say("paid")])
    options = Options(provider=provider, allowed_tools=[wire_money], guards=[AmountGuard()])
    with running(receiver):
        async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
            task_id = await client.start("pay", options, task_queue=task_queue, tenant="acme")
            await eventually(lambda: len(receiver.requests) >= 2, timeout=30)  # 503, then taken
            await client.approve(task_id, "c1", approver="user:ana")
            assert (await client.result(task_id)).answer == "paid"
    first, second = receiver.requests[:2]
    assert first[1] == second[1] and all(verified(*r) for r in (first, second))
    assert first[0][DELIVERY_HEADER.lower()] == f"{task_id}/c1"
    body = json.loads(second[1])
    assert (body["event"], body["task_id"], body["call_id"], body["guard"]) == ("approval_requested", task_id, "c1", "amount")
    assert body["tenant"] == "acme"
    assert body["action"]["arguments"] == {"amount": 2500} and body["reason"] == "wire of 2500 needs a human"
    assert not verified({SIGNATURE_HEADER.lower(): first[0][SIGNATURE_HEADER.lower()]}, second[1] + b" ")
    assert runs == [{"amount": 2500}]


def test_a_webhook_needs_a_secret():
    assert WebhookSettings.from_env({}).webhook() is None
    with pytest.raises(ConfigurationError, match="SECRET"):
        WebhookSettings.from_env({"NOETA_APPROVAL_WEBHOOK_URL": "https://hooks.example/a"}).webhook()
    with pytest.raises(ConfigurationError, match="http"):
        WebhookSettings.from_env({"NOETA_APPROVAL_WEBHOOK_URL": "ftp://hooks.example/a"})
