"""Images: stored once, referenced in history, sent inline to the provider."""

from __future__ import annotations

import base64
import dataclasses

import pytest

from noeta.client.options import HostConfig, Options
from noeta.errors import ConfigurationError
from noeta.protocols.tool import ToolResult
from noeta.providers.anthropic import AnthropicProvider
from noeta.providers.openai import OpenAIProvider
from noeta.sdk.images import image
from noeta.sdk._query import aquery
from noeta.sdk.tools import tool
from tests.support.chat_server import completion, running_chat_server
from tests.support.messages_server import (
    message,
    running_messages_server,
    text,
    tool_use,
)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
B64 = base64.b64encode(PNG).decode()


async def test_openai_gets_a_data_url_and_history_only_the_reference(host: HostConfig, tmp_path):
    picture = tmp_path / "dot.png"
    picture.write_bytes(PNG)
    block = image(picture, content_store=host.store())
    assert (block.source.media_type, block.source.size) == ("image/png", len(PNG))
    with running_chat_server() as server:
        server.reply(completion({"content": "a dot"}))
        provider = OpenAIProvider(base_url=server.base_url, api_key="k", model="m", name="openai-images")
        result = await aquery(Options(), goal="what is this?", images=[block], provider=provider, host=host)
    [user] = server.seen[0].body["messages"]
    assert user["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
    ]
    assert result.answer() == "a dot"
    [goal] = [e for e in result.events if e.type == "MessagesAppended"][:1]
    stored = goal.payload.messages[0].content[1]
    assert stored.source == block.source and stored.data is None  # history holds the reference only


async def test_anthropic_gets_base64_images_in_user_turns_and_tool_results(host: HostConfig):
    @tool(name="snapshot", version="1", input_schema={"type": "object"})
    def snapshot(arguments, ctx):
        return ToolResult(success=True, output="captured", images=[image(PNG, "image/png", host.store())])

    with running_messages_server() as server:
        server.reply(message([tool_use("c1", "snapshot", {})], "tool_use"))
        server.reply(message([text("two dots")]))
        provider = AnthropicProvider(base_url=server.base_url, api_key="k", model="claude-test", name="anthropic-images")
        result = await aquery(
            Options(allowed_tools=[snapshot]), goal="compare", provider=provider,
            images=[image(PNG, "image/png", host.store())], host=dataclasses.replace(host),
        )
    assert result.answer() == "two dots"
    first, second = (s.body for s in server.seen)
    source = {"type": "base64", "media_type": "image/png", "data": B64}
    goal_image = first["messages"][0]["content"][1]
    assert goal_image["cache_control"] == {"type": "ephemeral"}  # the end of the cacheable transcript
    assert {k: v for k, v in goal_image.items() if k != "cache_control"} == {"type": "image", "source": source}
    tool_result = {k: v for k, v in second["messages"][-1]["content"][0].items() if k != "cache_control"}
    assert tool_result["type"] == "tool_result"
    assert tool_result["content"][:1] == [{"type": "text", "text": "captured"}]
    assert tool_result["content"][1] == {"type": "image", "source": source}


def test_unsupported_media_type_is_refused(tmp_path):
    with pytest.raises(ConfigurationError, match="image media type"):
        image(b"%PDF-1.7", "application/pdf", content_store=None)
