"""A provider that echoes the API key in its error bodies: the key must not reach history, the
projected events or the logs. A real HTTP server of the test's own plays the provider."""

from __future__ import annotations

import io
import json
import logging

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.client.wire import envelope_to_dict
from noeta.errors import ProviderError
from noeta.providers.openai import OpenAIProvider
from noeta.security.scrub import REDACTED, scrub
from noeta.telemetry.logs import configure_logging
from tests.support.chat_server import FakeChatServer, error_body

# Not key-shaped: only the "configured key" rule can catch it.
CANARY = "canary-3f9a1b2c4d5e6f7081"
# Key-shaped, configured nowhere: the pattern rule must catch it.
SHAPED = "sk-live-9aZ8bY7cX6dW5eV4fU3gT2hS"


@pytest.fixture
def captured_logs():
    stream = io.StringIO()
    handler = configure_logging("DEBUG", json_format=False, stream=stream)
    try:
        yield stream
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger().setLevel(logging.WARNING)


async def test_echoed_key_is_absent_from_history_events_and_logs(
    chat: FakeChatServer, client: AsyncClient, serve, task_queue, captured_logs: io.StringIO
):
    provider = OpenAIProvider(base_url=chat.base_url, api_key=CANARY, model="gpt-test", name="echoing")
    chat.reply(error_body(f"upstream overloaded, your key {SHAPED} was logged"), status=503, retry_after_ms="10",
               x_echo_key=SHAPED)
    chat.reply(error_body(f"Incorrect API key provided: {CANARY}. Authorization: Bearer {CANARY}"), status=401,
               x_echo_key=CANARY)
    async with serve(providers=[provider]):
        task_id = await client.start("hello", Options(provider="echoing", max_retries=2), task_queue=task_queue)
        with pytest.raises(ProviderError) as failure:
            await client.result(task_id)
    # The provider did receive the key and did echo it (so each check below can fail).
    assert [s.headers["authorization"] for s in chat.seen] == [f"Bearer {CANARY}"] * 2
    assert failure.value.status == 401 and REDACTED in failure.value.message

    raw = b"".join(e.SerializeToString() for e in await client.history(task_id))
    events = json.dumps([envelope_to_dict(e) for e in await client.events(task_id)])
    logs = captured_logs.getvalue()
    for where, text in (("history", raw.decode("utf-8", "replace")), ("events", events), ("logs", logs), ("error", str(failure.value))):
        assert CANARY not in text, where
        assert SHAPED not in text, where
    assert "Incorrect API key provided: [REDACTED]" in events

    # Expected failures are one line each, with the task's id, not a traceback.
    failed = [line for line in logs.splitlines() if "Completing activity as failed" in line]
    assert len(failed) == 2, logs
    assert all(f"task_id={task_id}" in line and "ProviderError" in line for line in failed)
    assert "attempt=1" in failed[0] and "attempt=2" in failed[1]
    assert "Traceback" not in logs


def test_scrub_rules():
    text = (
        f"key {CANARY}; header x-api-key: abcdefghijklmnop; Bearer abc.def.ghijklmno; "
        "AKIAABCDEFGHIJKLMNOP; sk-ant-api03-abcdefghijklmnopqrstuv; api_key=hunter2hunter2; 42 tokens"
    )
    scrubbed = scrub(text, secrets=[CANARY])
    for secret in (CANARY, "abcdefghijklmnop", "abc.def.ghijklmno", "AKIAABCDEFGHIJKLMNOP", "sk-ant-api03", "hunter2hunter2"):
        assert secret not in scrubbed
    assert scrubbed.endswith("42 tokens")
    assert scrub("a plain provider error: model not found") == "a plain provider error: model not found"


@pytest.mark.parametrize("json_format", [False, True])
def test_json_log_lines_are_scrubbed_as_text_lines_are(json_format: bool, monkeypatch: pytest.MonkeyPatch):
    """A JSON line escapes quotes and backslashes: scrubbing the encoded line missed a configured
    secret holding them and a quoted ``password="…"``, which the text line redacts."""
    secret = 'pa"ss\\word-' + CANARY
    monkeypatch.setenv("NOETA_TEST_DB_PASSWORD", secret)  # configured: a credential-named variable
    stream = io.StringIO()
    handler = configure_logging("INFO", json_format=json_format, stream=stream)
    try:
        logging.getLogger("tests.scrub").info('connect with password="hunter2hunter2" and key %s', secret)
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger().setLevel(logging.WARNING)
    [line] = stream.getvalue().splitlines()
    message = json.loads(line)["message"] if json_format else line
    assert secret not in message and "hunter2hunter2" not in message
    assert message.endswith(f'connect with password="{REDACTED}" and key {REDACTED}')
