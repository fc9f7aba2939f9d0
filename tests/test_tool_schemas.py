"""Tool schemas where users write them: ``@tool(input_schema=Model)`` takes a pydantic model class,
``tool_description`` derives name, description and schema from a typed function; the seed's rules
hold (version and input_schema required; the schema is metadata, not a validator)."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, Field

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.sdk import ToolDefinitionError, ToolResult, tool, tool_description
from noeta.sdk.testing import FakeLLMProvider
from tests.support.scripts import call, say


class Lookup(BaseModel):
    """Find an order."""

    order_id: str = Field(description="the order's id")
    include_items: bool = False
    region: Literal["eu", "us"] = "eu"


def lookup_order(order_id: str, include_items: bool = False, limit: int | None = None) -> str:
    """Look up an order by its id.

    The lookup is read-only.

    Args:
        order_id: The order's id, as printed
            on the invoice.
        include_items (bool): Also list the items.

    Returns:
        The order as text.
    """
    return f"{order_id}:{include_items}:{limit}"


def test_a_pydantic_model_class_is_the_tools_schema():
    @tool(name="lookup", version="1", input_schema=Lookup)
    def lookup(arguments, ctx):
        return ToolResult(success=True, output=arguments["order_id"])

    assert lookup.input_schema == Lookup.model_json_schema()
    assert lookup.input_schema["required"] == ["order_id"]


def test_the_schema_is_metadata_not_a_validator_and_version_stays_required():
    @tool(name="lookup", version="1", input_schema=Lookup)
    def lookup(arguments, ctx):
        return ToolResult(success=True, output=str(arguments))

    assert lookup({"anything": 1}, None).output == "{'anything': 1}"  # not checked against Lookup
    with pytest.raises(TypeError, match="version"):
        tool(name="lookup", input_schema=Lookup)  # type: ignore[call-overload]
    with pytest.raises(ToolDefinitionError, match="input_schema must be a JSON Schema dict or a pydantic model class"):
        tool(name="lookup", version="1", input_schema=Lookup(order_id="x"))  # type: ignore[arg-type]


def test_a_typed_function_gives_name_description_and_schema():
    described = tool_description(lookup_order)
    assert described == {
        "name": "lookup_order",
        "description": "Look up an order by its id.\n\nThe lookup is read-only.",
        "input_schema": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "description": "The order's id, as printed on the invoice."},
                "include_items": {"type": "boolean", "default": False, "description": "Also list the items."},
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            },
            "required": ["order_id"],
        },
    }

    @tool(version="2", **described)
    def lookup(arguments, ctx):
        return ToolResult(success=True, output=lookup_order(**arguments))

    assert (lookup.name, lookup.version, lookup.input_schema) == ("lookup_order", "2", described["input_schema"])
    assert lookup({"order_id": "A1"}, None).output == "A1:False:None"
    assert tool_description(lookup_order, name="find")["name"] == "find"


def test_a_function_that_cannot_be_described_is_refused():
    def untyped(order_id):  # noqa: ANN001
        """Nope."""

    def variadic(*ids: str) -> None:
        """Nope."""

    with pytest.raises(ToolDefinitionError, match="parameter 'order_id' has no type annotation"):
        tool_description(untyped)
    with pytest.raises(ToolDefinitionError, match=r"\*ids cannot be described"):
        tool_description(variadic)


async def test_the_model_is_shown_the_derived_schemas(client: AsyncClient, serve, task_queue: str):
    @tool(name="lookup", version="1", input_schema=Lookup)
    def lookup(arguments, ctx):
        return ToolResult(success=True, output="found " + arguments["order_id"])

    @tool(version="1", **tool_description(lookup_order))
    def by_function(arguments, ctx):
        return ToolResult(success=True, output=lookup_order(**arguments))

    provider = FakeLLMProvider(responses=[call(("c1", "lookup", {"order_id": "A1"}),
                                               ("c2", "lookup_order", {"order_id": "B2"})), say("done")])
    async with serve(tools=[lookup, by_function], providers=[provider]):
        task_id = await client.start("Find A1.", Options(provider=provider, allowed_tools=[lookup, by_function]),
                                     task_queue=task_queue)
        result = await client.result(task_id)
    assert result.answer == "done"
    shown = {t["name"]: t for t in provider.received_requests[0].tools}
    assert set(shown) == {"lookup", "lookup_order"}
    assert Lookup.model_json_schema() in shown["lookup"].values()
    assert tool_description(lookup_order)["input_schema"] in shown["lookup_order"].values()
    tool_messages = [m for m in provider.received_requests[1].messages if m.role == "tool"]
    assert tool_messages, provider.received_requests[1].messages
