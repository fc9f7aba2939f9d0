"""``@tool``, DecoratedTool, tool_fingerprint and create_sdk_mcp_server (no Temporal needed)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from noeta.errors import NoetaError, ToolDefinitionError
from noeta.protocols.tool import Tool, ToolContext, ToolResult, tool_fingerprint
from noeta.sdk.tools import DecoratedTool, SdkMcpServer, create_sdk_mcp_server, tool

SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}


def _ctx() -> ToolContext:
    return ToolContext(task_id="task-1", call_id="call-1", tool_name="word_count", attempt=1)


def _word_count(arguments, ctx):
    """Count the words of a text."""
    return ToolResult(success=True, output=str(len(arguments["text"].split())))


# --------------------------------------------------------------------------- @tool


def test_seed_example_decorator_form(capsys: pytest.CaptureFixture[str]) -> None:
    @tool(name="word_count", version="1.0.0", input_schema=SCHEMA, description="Count words.")
    def word_count(arguments, ctx):
        return ToolResult(success=True, output=str(len(arguments["text"].split())))

    assert isinstance(word_count, DecoratedTool)
    print(word_count.name, word_count.risk_level)
    assert capsys.readouterr().out == "word_count low\n"

    assert word_count.name == "word_count"
    assert word_count.version == "1.0.0"
    assert word_count.input_schema == SCHEMA
    assert word_count.description == "Count words."
    assert word_count.risk_level == "low"
    assert word_count.timeout_seconds is None
    assert word_count.heartbeat_seconds is None
    assert word_count.max_retries is None


def test_decorated_tool_calls_the_wrapped_function() -> None:
    seen = []

    @tool(name="echo", version="1", input_schema={"type": "object"})
    def echo(arguments, ctx):
        seen.append((arguments, ctx))
        return ToolResult(success=True, output=arguments["x"])

    ctx = _ctx()
    assert echo({"x": "a"}, ctx) == ToolResult(success=True, output="a")
    assert echo.invoke({"x": "b"}, ctx) == ToolResult(success=True, output="b")
    assert seen == [({"x": "a"}, ctx), ({"x": "b"}, ctx)]
    assert echo.fn.__name__ == "echo"


def test_direct_call_form() -> None:
    t = tool(_word_count, name="word_count", version="2.0", input_schema=SCHEMA, risk_level="high")
    assert isinstance(t, DecoratedTool)
    assert (t.name, t.version, t.risk_level) == ("word_count", "2.0", "high")
    assert t({"text": "one two three"}, _ctx()) == ToolResult(success=True, output="3")


def test_description_defaults_to_stripped_docstring_and_explicit_wins() -> None:
    from_doc = tool(_word_count, name="wc", version="1", input_schema=SCHEMA)
    assert from_doc.description == "Count the words of a text."

    explicit = tool(_word_count, name="wc", version="1", input_schema=SCHEMA, description="Other.")
    assert explicit.description == "Other."

    def no_doc(arguments, ctx):
        return ToolResult(success=True)

    assert tool(no_doc, name="nd", version="1", input_schema=SCHEMA).description == ""


def test_optional_settings_are_carried() -> None:
    t = tool(
        _word_count,
        name="wc",
        version="1",
        input_schema=SCHEMA,
        risk_level="medium",
        timeout_seconds=12.5,
        heartbeat_seconds=3.0,
        max_retries=0,
    )
    assert t.risk_level == "medium"
    assert t.timeout_seconds == 12.5
    assert t.heartbeat_seconds == 3.0
    assert t.max_retries == 0


def test_decorated_tool_satisfies_the_tool_protocol() -> None:
    t = tool(_word_count, name="wc", version="1", input_schema=SCHEMA)
    assert isinstance(t, Tool)


def test_decorated_tool_is_frozen() -> None:
    t = tool(_word_count, name="wc", version="1", input_schema=SCHEMA)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.version = "2"  # type: ignore[misc]


@pytest.mark.parametrize("missing", ["name", "version", "input_schema"])
def test_missing_required_keyword_raises_type_error(missing: str) -> None:
    kwargs = {"name": "wc", "version": "1", "input_schema": SCHEMA}
    del kwargs[missing]
    with pytest.raises(TypeError, match=missing):
        tool(**kwargs)(_word_count)
    with pytest.raises(TypeError, match=missing):
        tool(_word_count, **kwargs)


def test_omitting_version_raises_type_error_even_with_everything_else() -> None:
    with pytest.raises(TypeError, match=r"missing required keyword argument\(s\): version"):

        @tool(name="wc", input_schema=SCHEMA, description="d", risk_level="low")  # type: ignore[call-arg]
        def wc(arguments, ctx):
            return ToolResult(success=True)


def test_missing_arguments_are_all_named() -> None:
    with pytest.raises(TypeError, match=r"name, version, input_schema"):
        tool()


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "not-a-type"},
        {"type": "object", "properties": {"x": {"type": 12}}},
        {"type": "object", "required": "x"},
        {"minLength": -1},
    ],
)
def test_invalid_json_schema_raises_tool_definition_error(schema: dict) -> None:
    with pytest.raises(ToolDefinitionError, match="input_schema is not valid JSON Schema") as info:
        tool(_word_count, name="bad", version="1", input_schema=schema)
    # The error is both a Noeta error and a TypeError, so `except TypeError` catches it too.
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, NoetaError)
    assert "'bad'" in str(info.value)


def test_tool_definition_error_is_a_type_error_subclass() -> None:
    assert issubclass(ToolDefinitionError, TypeError)
    assert issubclass(ToolDefinitionError, NoetaError)


@pytest.mark.parametrize("schema", [[], "object", None, 42])
def test_non_dict_schema_raises_tool_definition_error(schema) -> None:
    with pytest.raises(ToolDefinitionError, match="input_schema must be a JSON Schema dict"):
        tool(_word_count, name="bad", version="1", input_schema=schema)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": ""}, "tool name must be a non-empty string"),
        ({"name": 3}, "tool name must be a non-empty string"),
        ({"version": ""}, "version must be a non-empty string"),
        ({"version": 1}, "version must be a non-empty string"),
        ({"risk_level": "critical"}, "risk_level must be one of"),
    ],
)
def test_bad_metadata_raises_tool_definition_error(kwargs: dict, message: str) -> None:
    full = {"name": "wc", "version": "1", "input_schema": SCHEMA, **kwargs}
    with pytest.raises(ToolDefinitionError, match=re.escape(message)):
        tool(_word_count, **full)


def test_non_callable_raises_tool_definition_error() -> None:
    with pytest.raises(ToolDefinitionError, match="is not callable"):
        tool(name="wc", version="1", input_schema=SCHEMA)("not a function")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- fingerprint


def test_fingerprint_is_stable_and_matches_tool_fingerprint() -> None:
    a = tool(_word_count, name="wc", version="1", input_schema=SCHEMA)
    b = tool(_word_count, name="wc", version="1", input_schema=dict(SCHEMA))
    assert a.fingerprint == b.fingerprint == tool_fingerprint("wc", "1", SCHEMA)
    assert re.fullmatch(r"[0-9a-f]{16}", a.fingerprint)


def test_fingerprint_ignores_schema_key_order() -> None:
    reordered = {"required": ["text"], "properties": {"text": {"type": "string"}}, "type": "object"}
    assert tool_fingerprint("wc", "1", reordered) == tool_fingerprint("wc", "1", SCHEMA)


@pytest.mark.parametrize(
    "change",
    [
        {"name": "wc2"},
        {"version": "1.0.1"},
        {"input_schema": {**SCHEMA, "required": []}},
        {"input_schema": {"type": "object", "properties": {"text": {"type": "integer"}}}},
    ],
)
def test_identity_change_changes_fingerprint(change: dict) -> None:
    base = {"name": "wc", "version": "1", "input_schema": SCHEMA}
    before = tool(_word_count, **base)
    after = tool(_word_count, **{**base, **change})
    assert after.fingerprint != before.fingerprint
    assert tool_fingerprint(**{**base, **change}) != tool_fingerprint(**base)


def test_description_and_settings_do_not_change_fingerprint() -> None:
    base = tool(_word_count, name="wc", version="1", input_schema=SCHEMA, description="A")
    other = tool(
        _word_count,
        name="wc",
        version="1",
        input_schema=SCHEMA,
        description="B, completely different",
        risk_level="high",
        timeout_seconds=1.0,
        max_retries=7,
    )
    assert other.fingerprint == base.fingerprint


# --------------------------------------------------------------------------- create_sdk_mcp_server


def _tools() -> tuple[DecoratedTool, DecoratedTool]:
    return (
        tool(_word_count, name="a", version="1", input_schema=SCHEMA),
        tool(_word_count, name="b", version="1", input_schema=SCHEMA),
    )


def test_create_sdk_mcp_server_carries_name_version_tools() -> None:
    a, b = _tools()
    server = create_sdk_mcp_server("text", version="2.1.0", tools=[a, b])
    assert isinstance(server, SdkMcpServer)
    assert server.name == "text"
    assert server.version == "2.1.0"
    assert server.tools == (a, b)
    assert isinstance(server.tools, tuple)


def test_create_sdk_mcp_server_defaults() -> None:
    server = create_sdk_mcp_server("empty")
    assert server.version == "1.0.0"
    assert server.tools == ()


def test_create_sdk_mcp_server_accepts_any_iterable() -> None:
    a, b = _tools()
    server = create_sdk_mcp_server("gen", tools=(t for t in (a, b)))
    assert server.tools == (a, b)


@pytest.mark.parametrize("name", ["", None, 5])
def test_create_sdk_mcp_server_rejects_bad_name(name) -> None:
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        create_sdk_mcp_server(name, tools=_tools())  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [_word_count, "a", object(), None])
def test_create_sdk_mcp_server_rejects_non_decorated_tools(bad) -> None:
    a, _ = _tools()
    with pytest.raises(TypeError, match="is not a @tool function"):
        create_sdk_mcp_server("srv", tools=[a, bad])


def test_sdk_mcp_server_is_frozen() -> None:
    server = create_sdk_mcp_server("srv", tools=_tools())
    with pytest.raises(dataclasses.FrozenInstanceError):
        server.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        server.tools = ()  # type: ignore[misc]
    assert server.name == "srv"
