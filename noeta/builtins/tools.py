"""Safe built-in tools, served by ``noeta run`` and ``noeta worker`` unless ``--no-builtins``.

Each one only reads (calculator, word_count and current_time, which cannot block, run as local
activities: docs/tools.md): arithmetic without ``eval``, a word count, a file inside the task's workspace
(path traversal and symbolic links out of it refused), the current time, and a wait (to watch a
task survive a killed worker). Bad arguments come back to the model as a failed result, never as an
exception that would be retried.
"""

from __future__ import annotations

import ast
import asyncio
import math
import operator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from noeta.errors import ToolInputError
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.protocols.tool_decorator import DecoratedTool, ToolDecorator, tool

MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 10**100
MAX_FILE_BYTES = 64 * 1024
MAX_WAIT_SECONDS = 300

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def as_python_operators(expression: str) -> str:
    """``expression`` with the operators people write (``×``, ``÷``, ``^``) as Python's."""
    return expression.replace("×", "*").replace("÷", "/").replace("^", "**")


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression: numbers, ``+ - * / // % **`` and parentheses.

    Parsed with :mod:`ast` and walked node by node; anything else (names, calls, attributes...)
    raises :class:`ToolInputError`, as do huge powers and results (they would hang the worker).
    """
    text = as_python_operators(expression).strip()
    if not text:
        raise ToolInputError("empty expression")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ToolInputError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        raise ToolInputError(f"not an arithmetic expression: {expression!r}") from err
    return _value(tree.body)


def _value(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        value: int | float = _UNARY[type(node.op)](_value(node.operand))
        return value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ToolInputError(f"exponent {right} is larger than {MAX_EXPONENT}")
        try:
            result: int | float | complex = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError as err:
            raise ToolInputError("division by zero") from err
        except OverflowError as err:
            raise ToolInputError("the result is too large") from err
        if isinstance(result, complex):
            raise ToolInputError("the result is not a real number")
        if abs(result) > MAX_MAGNITUDE:
            raise ToolInputError("the result is too large")
        return result
    raise ToolInputError(f"only numbers and + - * / // % ** ( ) are allowed, not {type(node).__name__}")


def format_number(value: int | float) -> str:
    """``value`` as the calculator prints it: whole floats without ``.0``, others with at most 12 significant
    digits."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return "nan" if math.isnan(value) else format(value, ".12g")
    return str(value)


def _refused(err: ToolInputError) -> ToolResult:
    return ToolResult(success=False, output=str(err))


def _builtin(
    name: str,
    description: str,
    arguments: dict[str, tuple[str, str]],
    *,
    timeout_seconds: float | None = 30,
    heartbeat_seconds: float | None = None,
    local: bool = False,
) -> ToolDecorator:
    """``@tool`` for a built-in: version 1, every argument (``name: (JSON type, description)``)
    required; ``local``: a tool that cannot block runs as a local activity (its timeout then
    LOCAL_TOOL_TIMEOUT_SECONDS). The schema comes out exactly as it was written out per tool, so the tools'
    fingerprints (recorded in tasks' histories) stay the same."""
    properties = {arg: {"type": kind, "description": text} for arg, (kind, text) in arguments.items()}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if properties:
        schema["required"] = list(properties)
    return tool(
        name=name, version="1", input_schema=schema, description=description,
        timeout_seconds=None if local else timeout_seconds, heartbeat_seconds=heartbeat_seconds, local=local,
    )


@_builtin(
    "calculator",
    "Evaluate an arithmetic expression with + - * / // % ** and parentheses.",
    {"expression": ("string", "arithmetic, e.g. 12 * (3 + 4)")},
    local=True,
)
def calculator(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """The calculator tool: the value of ``expression``, or a failed result saying why it cannot be evaluated.
    """
    try:
        value = format_number(evaluate(str(arguments["expression"])))
    except ToolInputError as err:
        return _refused(err)
    return ToolResult(success=True, output=value, summary=f"{arguments['expression']} = {value}")


@_builtin(
    "word_count", "Count the words in a text.", {"text": ("string", "the text whose words to count")}, local=True
)
def word_count(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """The word_count tool: how many whitespace-separated words ``text`` has."""
    return ToolResult(success=True, output=str(len(str(arguments["text"]).split())))


def workspace_of(ctx: ToolContext) -> Path:
    """The task's workspace (``noeta run`` records its working directory), else this process's."""
    return Path(ctx.workspace_dir or Path.cwd()).resolve()


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """``path`` (relative to ``workspace``) resolved, symbolic links included; refused unless it
    stays inside the workspace."""
    root = workspace.resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise ToolInputError(f"{path!r} is outside the workspace")
    return target


@_builtin(
    "read_file", "Read a text file in the workspace directory.", {"path": ("string", "path relative to the workspace")}
)
def read_file(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """The read_file tool: a file of the task's workspace as text (at most MAX_FILE_BYTES); a path outside the
    workspace or a missing file is a failed result."""
    path = str(arguments["path"])
    try:
        target = resolve_in_workspace(workspace_of(ctx), path)
        if not target.is_file():
            raise ToolInputError(f"no file {path!r} in the workspace")
        with target.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except ToolInputError as err:
        return _refused(err)
    text = data[:MAX_FILE_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_FILE_BYTES:
        text += f"\n[truncated at {MAX_FILE_BYTES} bytes]"
    return ToolResult(success=True, output=text, summary=f"read {path} ({len(data[:MAX_FILE_BYTES])} bytes)")


@_builtin("current_time", "The current date and time (UTC).", {}, local=True)
def current_time(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """The current_time tool: the current UTC date and time."""
    return ToolResult(success=True, output=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))


@_builtin(
    "wait",
    "Wait for a number of seconds, then report it.",
    {"seconds": ("number", f"how long, at most {MAX_WAIT_SECONDS}")},
    # A killed worker is noticed within seconds (no heartbeat), and the wait starts again elsewhere.
    heartbeat_seconds=5,
    timeout_seconds=MAX_WAIT_SECONDS + 30,
)
async def wait(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """The wait tool: sleep ``seconds`` (0 to MAX_WAIT_SECONDS), then say so."""
    seconds = float(arguments["seconds"])
    if not 0 <= seconds <= MAX_WAIT_SECONDS:
        return _refused(ToolInputError(f"seconds must be between 0 and {MAX_WAIT_SECONDS}"))
    await asyncio.sleep(seconds)
    return ToolResult(success=True, output=f"waited {format_number(seconds)} seconds")


BUILTIN_TOOLS: tuple[DecoratedTool, ...] = (calculator, word_count, read_file, current_time, wait)
