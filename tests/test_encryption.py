"""Payload encryption end to end: a real task with a tool call on the dev server, its raw
history read without the codec, the content store's files, key rotation, and the codec server
over real HTTP."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.history.v1 import HistoryEvent

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.options import HostConfig, Options
from noeta.context.content_store import LocalContentStore
from noeta.errors import EncryptionKeyError
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.security.codec import ENCODING, KEY_ID_KEY, EncryptionCodec, codec_from_env
from noeta.security.codec_server import create_codec_app
from noeta.security.http_guard import GuardConfig
from noeta.security.keys import KeyRing, keyring_from_env, new_key_entry, parse_keys
from noeta.security.sealed_bodies import BodyCipher
from noeta.worker import Registry, build_worker
from tests.support.asgi import serving
from tests.support.scripts import call, say

GOAL = "GOAL-7d1e: reconcile the ledger of customer ACME-4471"
ARG = "ARG-93b2-account-IBAN-DE00123"
OUTPUT = "OUTPUT-5c0f-balance-is-1234567"
ANSWER = "ANSWER-e8a6: the ledger reconciles"
SECRETS = (GOAL, ARG, OUTPUT, ANSWER)
TOKEN = "codec-token-" + "f" * 24


@tool(
    name="ledger_lookup",
    version="1",
    input_schema={"type": "object", "properties": {"account": {"type": "string"}}, "required": ["account"]},
    description="Look up an account; returns a long statement.",
)
def ledger_lookup(arguments: dict, ctx: ToolContext) -> ToolResult:
    # Over the inline limit: the body goes to the content store, history keeps a preview + ref.
    statement = f"{OUTPUT} for {arguments['account']}\n" + "line of statement\n" * 400
    return ToolResult(success=True, output=statement)


def ring(*entries: str) -> KeyRing:
    keys = parse_keys(entries)
    assert keys is not None
    return keys


def history_bytes(events: list[HistoryEvent]) -> bytes:
    return b"".join(e.SerializeToString() for e in events)


async def run_task(settings: Settings, store_dir: Path, keys: KeyRing, task_queue: str) -> tuple[str, AsyncClient]:
    store = LocalContentStore(store_dir, cipher=BodyCipher(keys))
    client = await AsyncClient.connect(HostConfig(settings=settings, content_store=store, codec=EncryptionCodec(keys)))
    provider = plain_provider()
    registry = Registry.of(tools=[ledger_lookup], providers=[provider], content_store=store)
    async with build_worker(client.temporal, registry, task_queue, workflow_failure_exception_types=[Exception]):
        task_id = await client.start(GOAL, Options(provider=provider, allowed_tools=[ledger_lookup]), task_queue=task_queue)
        assert (await client.result(task_id)).answer == ANSWER
    return task_id, client


@pytest.fixture
def keys_v1() -> str:
    return new_key_entry("v1")


def plain_provider() -> FakeLLMProvider:
    return FakeLLMProvider(responses=[call(("c1", "ledger_lookup", {"account": ARG})), say(ANSWER)])


async def test_no_plaintext_in_raw_history_or_content_store(
    settings: Settings, client: AsyncClient, serve, tmp_path: Path, task_queue: str, keys_v1: str
):
    keys = ring(keys_v1)
    task_queue_plain = task_queue
    task_id, secure = await run_task(settings, tmp_path / "content", keys, f"{task_queue}-secure")

    # Read with the codec: everything is there.
    items = await secure.messages(task_id)
    text = repr(items)
    assert GOAL in text and ARG in text and ANSWER in text
    assert any(OUTPUT in (getattr(i, "output", None) or "") for i in items)

    # Raw history through a client without the codec: not one of those strings, in any form.
    raw = history_bytes(await client.history(task_id))
    for secret in SECRETS:
        for form in (secret.encode(), base64.b64encode(secret.encode())):
            assert form not in raw, secret
    assert ENCODING in raw  # the payloads are there, as ciphertext

    # The same check finds them in a task run without encryption (so it can fail).
    async with serve(tools=[ledger_lookup], providers=[provider := plain_provider()]):
        plain_task = await client.start(GOAL, Options(provider=provider, allowed_tools=[ledger_lookup]), task_queue=task_queue_plain)
        await client.result(plain_task)
    plain = history_bytes(await client.history(plain_task))
    assert all(s.encode() in plain for s in (GOAL, ARG, ANSWER))

    # The content store's files hold ciphertext only; reading through the cipher works.
    files = [p for p in (tmp_path / "content").rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert not any(s.encode() in path.read_bytes() for s in SECRETS), path
    body = next(p for p in files if len(p.parent.name) == 2 and len(p.name) == 62)  # not bookkeeping files
    plain_reader = LocalContentStore(tmp_path / "content")
    with pytest.raises(EncryptionKeyError):
        plain_reader.get(body.parent.name + body.name)


async def test_rotation_keeps_old_tasks_readable(
    settings: Settings, client: AsyncClient, tmp_path: Path, task_queue: str, keys_v1: str
):
    old_task, _ = await run_task(settings, tmp_path / "content", ring(keys_v1), task_queue)

    keys_v2 = new_key_entry("v2")
    rotated = ring(keys_v2, keys_v1)  # v2 encrypts, v1 still decrypts
    store = LocalContentStore(tmp_path / "content", cipher=BodyCipher(rotated))
    reader = await AsyncClient.connect(HostConfig(settings=settings, content_store=store, codec=EncryptionCodec(rotated)))
    assert (await reader.result(old_task)).answer == ANSWER
    assert any(OUTPUT in (getattr(i, "output", None) or "") for i in await reader.messages(old_task))

    new_task, _ = await run_task(settings, tmp_path / "content", rotated, f"{task_queue}-2")
    key_ids = {
        p.metadata[KEY_ID_KEY]
        for e in await client.history(new_task)  # raw, no codec
        if e.HasField("workflow_execution_started_event_attributes")
        for p in e.workflow_execution_started_event_attributes.input.payloads
    }
    assert key_ids == {b"v2"}

    # Dropping the old key makes the old task unreadable, with an error that says which key.
    only_v2 = ring(keys_v2)
    forgetful = await AsyncClient.connect(
        HostConfig(settings=settings, content_store=store, codec=EncryptionCodec(only_v2))
    )
    with pytest.raises(EncryptionKeyError, match="'v1'"):
        await forgetful.result(old_task)
    assert (await forgetful.result(new_task)).answer == ANSWER


def test_keys_from_environment(tmp_path: Path, keys_v1: str):
    assert keyring_from_env({}) is None and codec_from_env({}) is None
    v2 = new_key_entry("v2")
    keys = keyring_from_env({"NOETA_ENCRYPTION_KEYS": f"{v2},{keys_v1}"})
    assert keys is not None and (keys.active_id, list(keys.keys)) == ("v2", ["v2", "v1"])
    path = tmp_path / "keys"
    path.write_text(f"# active first\n{keys_v1}\n{v2}\n")
    from_file = keyring_from_env({"NOETA_ENCRYPTION_KEYS_FILE": str(path)})
    assert from_file is not None and from_file.active_id == "v1"
    assert isinstance(codec_from_env({"NOETA_ENCRYPTION_KEYS": keys_v1}), EncryptionCodec)
    assert "v1:" not in repr(keys) and keys_v1.split(":")[1] not in repr(keys)
    for bad in ("nokey", "k:not*base64", "k:" + base64.b64encode(b"short").decode(), f"{keys_v1},{keys_v1}"):
        with pytest.raises(EncryptionKeyError):
            keyring_from_env({"NOETA_ENCRYPTION_KEYS": bad})
    with pytest.raises(EncryptionKeyError):
        keyring_from_env({"NOETA_ENCRYPTION_KEYS": keys_v1, "NOETA_ENCRYPTION_KEYS_FILE": str(path)})


def test_user_codec_hook():
    from noeta.errors import ConfigurationError

    codec = codec_from_env({"NOETA_CODEC": "tests.test_encryption:example_codec"})
    assert isinstance(codec, EncryptionCodec) and codec.keys.active_id == "kms"
    with pytest.raises(ConfigurationError):
        codec_from_env({"NOETA_CODEC": "tests.test_encryption:not_a_codec"})
    with pytest.raises(ConfigurationError):
        codec_from_env({"NOETA_CODEC": "no_such_module:factory"})


def not_a_codec() -> str:
    return "a string"


def example_codec() -> EncryptionCodec:
    """What a user's NOETA_CODEC factory looks like (a KMS-backed codec in real life)."""
    return EncryptionCodec(ring(new_key_entry("kms")))


async def test_codec_server_decodes_for_a_token_only(
    settings: Settings, client: AsyncClient, tmp_path: Path, task_queue: str, keys_v1: str
):
    keys = ring(keys_v1)
    task_id, _ = await run_task(settings, tmp_path / "content", keys, task_queue)
    events = await client.history(task_id)  # raw, as the UI receives it
    started = next(e for e in events if e.HasField("workflow_execution_started_event_attributes"))
    tool_done = [
        e.activity_task_completed_event_attributes.result
        for e in events
        if e.HasField("activity_task_completed_event_attributes")
        and b"ledger_lookup" not in e.SerializeToString()  # (names are inside the ciphertext)
    ]
    body = json_format.MessageToJson(started.workflow_execution_started_event_attributes.input)
    ui = "http://localhost:8233"
    guard = GuardConfig(api_keys=(TOKEN,), cors_origins=(ui,))
    store = LocalContentStore(tmp_path / "content", cipher=BodyCipher(keys))
    app = create_codec_app(EncryptionCodec(keys), guard, store=store, expand_refs=True)
    async with serving(app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        json_headers = {"content-type": "application/json", "x-namespace": "default"}
        refused = await http.post("/decode", content=body, headers=json_headers)
        assert (refused.status_code, refused.json()["error"]) == (401, "Unauthorized")
        wrong = await http.post("/decode", content=body, headers={**json_headers, "authorization": "Bearer " + "x" * 36})
        assert wrong.status_code == 401

        auth = {**json_headers, "authorization": f"Bearer {TOKEN}", "origin": ui}
        decoded = await http.post("/decode", content=body, headers=auth)
        assert decoded.status_code == 200, decoded.text
        assert decoded.headers["access-control-allow-origin"] == ui
        payloads = json_format.Parse(decoded.content, Payloads())
        assert GOAL.encode() in payloads.payloads[0].data
        assert payloads.payloads[0].metadata["encoding"] == b"json/plain"

        # The browser's preflight from the UI's origin is answered; another origin is refused.
        preflight = await http.options(
            "/decode", headers={"origin": ui, "access-control-request-method": "POST", "access-control-request-headers": "authorization,content-type,x-namespace"}
        )
        assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == ui
        foreign = await http.post("/decode", content=body, headers={**auth, "origin": "https://evil.example"})
        assert (foreign.status_code, foreign.json()["error"]) == (403, "ForbiddenOrigin")

        # Round trip through /encode, and whole tool outputs through expanded references.
        encoded = await http.post("/encode", content=decoded.content, headers=auth)
        assert encoded.status_code == 200 and ENCODING.decode() not in decoded.text
        again = json_format.Parse(encoded.content, Payloads())
        assert again.payloads[0].metadata["encoding"] == ENCODING and GOAL.encode() not in again.payloads[0].data
        expanded = []
        for result in tool_done:
            response = await http.post("/decode", content=json_format.MessageToJson(result), headers=auth)
            assert response.status_code == 200
            expanded += [p.data for p in json_format.Parse(response.content, Payloads()).payloads]
        full = next(d for d in expanded if OUTPUT.encode() in d)
        assert full.count(b"line of statement") == 400  # the whole body, not the 512-character preview

        bad = await http.post("/decode", content=b"{not json", headers=auth)
        assert bad.status_code == 400

        # The token as the endpoint's first path part (the deploy kit's UI: it sends no header).
        in_path = await http.post(f"/{TOKEN}/decode", content=body, headers={**json_headers, "origin": ui})
        assert in_path.status_code == 200 and GOAL.encode() in json_format.Parse(in_path.content, Payloads()).payloads[0].data
        wrong_path = await http.post(f"/{'x' * 36}/decode", content=body, headers=json_headers)
        assert wrong_path.status_code == 401
        preflight = await http.options(
            f"/{TOKEN}/decode", headers={"origin": ui, "access-control-request-method": "POST", "access-control-request-headers": "content-type,x-namespace"}
        )
        assert preflight.status_code == 204
        assert (await http.post(f"/{TOKEN}/other", content=body, headers=json_headers)).status_code in (401, 404)


async def test_codec_server_refuses_unknown_keys_without_a_traceback(tmp_path: Path, keys_v1: str):
    writer = EncryptionCodec(ring(keys_v1))
    [sealed] = await writer.encode([Payload(metadata={"encoding": b"json/plain"}, data=b'"x"')])
    app = create_codec_app(EncryptionCodec(ring(new_key_entry("other"))), GuardConfig(api_keys=(TOKEN,)))
    async with serving(app) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post(
            "/decode",
            content=json_format.MessageToJson(Payloads(payloads=[sealed])),
            headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/json"},
        )
    assert (response.status_code, response.json()["error"]) == (422, "EncryptionKeyError")
    assert "Traceback" not in response.text and "'v1'" in response.json()["message"]


FAILURE_TEXT = "FAIL-41c7: order 9981 for jane@example.com was rejected"


def rejecting(request):
    from noeta.errors import ProviderError

    raise ProviderError(provider="strict", message=FAILURE_TEXT, status=400)


async def test_failure_messages_are_encrypted_and_projected(
    settings: Settings, client: AsyncClient, tmp_path: Path, task_queue: str, keys_v1: str
):
    from noeta.errors import ProviderError

    keys = ring(keys_v1)
    store = LocalContentStore(tmp_path / "content", cipher=BodyCipher(keys))
    secure = await AsyncClient.connect(HostConfig(settings=settings, content_store=store, codec=EncryptionCodec(keys)))
    provider = FakeLLMProvider(responder=rejecting)
    registry = Registry.of(providers=[provider], content_store=store)
    async with build_worker(secure.temporal, registry, task_queue, workflow_failure_exception_types=[Exception]):
        task_id = await secure.start("try it", Options(provider=provider), task_queue=task_queue)
        with pytest.raises(ProviderError, match="FAIL-41c7"):
            await secure.result(task_id)
    raw = history_bytes(await client.history(task_id))
    assert b"FAIL-41c7" not in raw and b"jane@example.com" not in raw
    failed = [e for e in await secure.events(task_id) if e.type == "TaskFailed"]
    assert failed and "FAIL-41c7" in failed[0].payload.reason
