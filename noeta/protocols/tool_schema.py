"""Tool schemas where users write them: from a pydantic model, or from a typed function.

``@tool(..., input_schema=Model)`` takes a pydantic model class as well as a JSON Schema dict;
:func:`schema_of` turns either into the dict the model is shown. :func:`tool_description` reads a
typed function — its name, its docstring's summary and ``Args:`` section, its parameters' types and
defaults — into the ``name``, ``description`` and ``input_schema`` keywords of ``@tool``::

    def lookup_order(order_id: str, include_items: bool = False) -> str:
        \"\"\"Look up an order.

        Args:
            order_id: The order's id, as printed on the invoice.
        \"\"\"

    @tool(version="1", **tool_description(lookup_order))
    def lookup(arguments, ctx):
        return ToolResult(success=True, output=lookup_order(**arguments))

Either way the schema is metadata for the model, not a validator (see ``validate_input``), and
``version`` stays required.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, TypedDict, get_type_hints

from pydantic import BaseModel, Field, create_model

from noeta.errors import ToolDefinitionError

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Return|Yields|Raises|Examples?|Notes?):\s*$")
_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class ToolDescription(TypedDict):
    """``name``, ``description`` and ``input_schema`` for ``@tool(version=..., **description)``."""

    name: str
    description: str
    input_schema: dict[str, Any]


def is_model_class(value: object) -> bool:
    """Whether ``value`` is a pydantic model class (not an instance)."""
    return isinstance(value, type) and issubclass(value, BaseModel)


def schema_of(input_schema: object, tool_name: str) -> dict[str, Any]:
    """The JSON Schema dict of ``input_schema``: a dict as given, a pydantic model class's
    ``model_json_schema()``; ToolDefinitionError for anything else."""
    if is_model_class(input_schema):
        schema: dict[str, Any] = input_schema.model_json_schema()  # type: ignore[attr-defined]
        return schema
    if isinstance(input_schema, dict):
        return input_schema
    raise ToolDefinitionError(
        f"tool {tool_name!r}: input_schema must be a JSON Schema dict or a pydantic model class, "
        f"got {type(input_schema).__name__}"
    )


def tool_description(fn: Callable[..., Any], *, name: str | None = None) -> ToolDescription:
    """``fn``'s name (or ``name``), description (its docstring without the ``Args:``-style
    sections) and input schema (one property per parameter, typed by its annotation, required
    unless it has a default, described by its line under ``Args:``). ToolDefinitionError for a
    parameter without a type annotation or a ``*args``/``**kwargs`` parameter."""
    tool_name = name or getattr(fn, "__name__", "")
    if not tool_name or not callable(fn):
        raise ToolDefinitionError(f"tool_description needs a named function, got {fn!r}")
    summary, documented = _read_docstring(inspect.getdoc(fn) or "")
    try:
        hints = get_type_hints(fn)
    except Exception as err:  # noqa: BLE001 (an annotation that does not resolve)
        raise ToolDefinitionError(f"tool {tool_name!r}: its annotations do not resolve: {err}") from err
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"tool {tool_name!r}: *{param.name} cannot be described to a model; "
                                      "name every parameter")
        if param.name not in hints:
            raise ToolDefinitionError(f"tool {tool_name!r}: parameter {param.name!r} has no type annotation")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints[param.name], Field(default, description=documented.get(param.name)))
    model: type[BaseModel] = create_model(tool_name, **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return ToolDescription(name=tool_name, description=summary, input_schema=schema)


def _read_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The docstring's text outside its sections, and each ``Args:`` entry's description (an
    entry is ``name: text`` or ``name (type): text``; more indented lines continue it)."""
    text: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    entry_indent = 0
    for line in doc.splitlines():
        stripped, indent = line.strip(), len(line) - len(line.lstrip())
        heading = _SECTION.match(stripped)
        if heading and indent == 0:
            section, current = heading.group(1), None
            continue
        if section is None:
            text.append(line)
        elif section in ("Args", "Arguments", "Parameters") and stripped:
            entry = _ARG.match(stripped)
            if entry and (current is None or indent <= entry_indent):
                current, entry_indent = entry.group(1).lstrip("*"), indent
                args[current] = entry.group(2).strip()
            elif current is not None:
                args[current] = f"{args[current]} {stripped}".strip()
    return "\n".join(text).strip(), args


__all__ = ["ToolDescription", "is_model_class", "schema_of", "tool_description"]
