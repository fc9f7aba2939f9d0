"""The cap on what a tool result sends to the model (``Options.max_tool_output_tokens``): the
provider's request holds the output's start and end around a note, within the cap; the transcript,
the content store and ``messages()`` keep the whole output."""

from __future__ import annotations

import json

import pytest

from noeta.client.client import AsyncClient
from noeta.client.messages import ToolResultView
from noeta.client.options import Options
from noeta.errors import ConfigurationError
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.protocols.context_window import text_tokens
from noeta.protocols.tool_output_cap import DEFAULT_MAX_TOOL_OUTPUT_TOKENS, MAX_BYTES_PER_TOKEN, capped_tool_output
from noeta.sdk.tools import tool
from tests.support.chat_server import FakeChatServer, completion, openai_for

FIFTY_MB = 50 * 2**20


def huge_text(size: int) -> str:
    line = "row " + "y" * 59 + "\n"
    body = "FIRST LINE\n" + line * (size // len(line))
    return body[: size - len("LAST LINE")] + "LAST LINE"


@tool(name="dump", version="1", input_schema={"type": "object", "properties": {}}, description="A 50 MB dump.")
def dump(arguments: dict, ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output=huge_text(FIFTY_MB))


def test_an_output_within_the_cap_is_sent_as_it_is():
    text = "é" * 1200  # 960 tokens as compaction counts them (0.8 a symbol), 2,400 bytes
    assert capped_tool_output(text, 1000) is text
    assert capped_tool_output(text, None) is text
    assert capped_tool_output("0123456789" * 100, 1000) == "0123456789" * 100  # a token a digit: 1,000


@pytest.mark.parametrize(
    "text",
    [
        "A" * 3 + "é" * 10_000 + "漢" * 10_000 + "Z" * 3,  # multi-byte characters at both cuts
        "0123456789" * 5000,  # dense: a token a digit
        " " * 1_000_000 + "end",  # cheap by the count: held by the byte bound
        "word " * 100_000,
    ],
)
def test_an_output_over_the_cap_keeps_its_start_and_end_within_the_cap(text):
    capped = capped_tool_output(text, 1024)
    assert text_tokens(capped) <= 1024
    assert len(capped.encode()) <= 1024 * MAX_BYTES_PER_TOKEN
    head, rest = capped.split("\n\n[…", 1)
    tail = rest.split("…]\n\n", 1)[1]
    assert text.startswith(head) and text.endswith(tail) and head and tail
    left_out = len(text.encode()) - len(head.encode()) - len(tail.encode())
    assert rest.startswith(f" {left_out} bytes of this tool output left out here: it has {len(text.encode())} bytes")
    assert "over the cap of 1024 tokens (max_tool_output_tokens)" in capped
    assert "kept in the task's transcript" in capped


@pytest.mark.parametrize("value", [0, 1023, 10_000_001, 2.5, True])
def test_a_cap_out_of_range_is_refused_when_options_are_built(value):
    with pytest.raises(ConfigurationError, match="max_tool_output_tokens must be a whole number from 1024 to 1e"):
        Options(max_tool_output_tokens=value)


async def test_a_50_mb_tool_output_reaches_the_model_capped_and_messages_keep_it_whole(
    client: AsyncClient, serve, task_queue, chat: FakeChatServer
):
    chat.reply(completion({"content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "dump", "arguments": "{}"}},
    ]}, finish_reason="tool_calls"))
    chat.reply(completion({"content": "seen the dump"}))
    chat.reply(completion({"content": "still fine"}))
    provider = openai_for(chat)
    async with serve(tools=[dump], providers=[provider]):
        task_id = await client.start(
            "dump it", Options(provider=provider, allowed_tools=[dump]), task_queue=task_queue, keep_open=True
        )
        # A later call still sends the capped output, not the whole one.
        second = await client.send_goal(task_id, "and again?")
        await client.close_task(task_id)
        final = await client.result(task_id)
    assert (second.answer, final.answer) == ("still fine", "still fine")
    assert chat.seen[1].body["messages"][-1]["content"] != "and again?"  # the first goal's second call
    cap_bytes = DEFAULT_MAX_TOOL_OUTPUT_TOKENS * MAX_BYTES_PER_TOKEN
    for seen in chat.seen[1:]:
        [result] = [m for m in seen.body["messages"] if m["role"] == "tool"]
        assert text_tokens(result["content"]) <= DEFAULT_MAX_TOOL_OUTPUT_TOKENS
        assert len(result["content"].encode()) <= cap_bytes
        assert result["content"].startswith("FIRST LINE\nrow y") and result["content"].endswith("yyyyLAST LINE")
        assert f"it has {FIFTY_MB} bytes" in result["content"]
        # the whole request: the capped output plus a few hundred bytes of everything else
        assert len(json.dumps(seen.body).encode()) < len(result["content"].encode()) + 4096
    [view] = [m for m in await client.messages(task_id) if isinstance(m, ToolResultView)]
    assert view.output == huge_text(FIFTY_MB)


async def test_no_cap_sends_the_whole_output(client: AsyncClient, serve, task_queue, chat: FakeChatServer):
    chat.reply(completion({"content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "medium", "arguments": "{}"}},
    ]}, finish_reason="tool_calls"))
    chat.reply(completion({"content": "done"}))

    @tool(name="medium", version="1", input_schema={"type": "object", "properties": {}}, description="200 KB.")
    def medium(arguments: dict, ctx: ToolContext) -> ToolResult:
        return ToolResult(success=True, output=huge_text(200_000))

    provider = openai_for(chat)
    async with serve(tools=[medium], providers=[provider]):
        task_id = await client.start(
            "go", Options(provider=provider, allowed_tools=[medium], max_tool_output_tokens=None), task_queue=task_queue
        )
        assert (await client.result(task_id)).answer == "done"
    [result] = [m for m in chat.seen[1].body["messages"] if m["role"] == "tool"]
    assert result["content"] == huge_text(200_000)
