"""The public API's signatures, checked the way a user's type checker sees them: mypy --strict on a
small program that uses the API correctly (no error allowed) and on one that misuses it (each
misuse reported at its line, with its error code). A signature that regresses to ``Any`` or
``**kwargs`` lets a misuse through, and this test fails."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Both tests read one mypy run (~45 s cold on 2 busy cores): under xdist they share a worker, which
# runs the module-scoped fixture once; apart, each worker ran mypy over the whole package again.
pytestmark = [pytest.mark.xdist_group("typing"), pytest.mark.slow, pytest.mark.server]

CORRECT = '''
from collections.abc import Coroutine
from typing import Any, assert_type

from pydantic import BaseModel

from noeta.protocols.hooks import GuardDecision
from noeta.sdk import (
    ContentStore, DecoratedTool, Finish, GoalStatus, Guard, GuardContext, LLMProvider, LLMRequest, LLMResponse,
    Options, ProposedAction, QueryResult, Registry, Result, ResultStatus, SdkMcpServer, TaskStatus, TextBlock,
    ToolContext, ToolResult, Validator, VerdictResult, create_sdk_mcp_server, expect_validator, query, tool,
)
from noeta.sdk.testing import FakeLLMProvider

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}


@tool(name="word_count", version="1", input_schema=SCHEMA, risk_level="low")
def word_count(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output=str(len(arguments["text"].split())))


@tool(name="fetch", version="2", input_schema=SCHEMA, timeout_seconds=30, resources=["http"])
async def fetch(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output=arguments["text"])


def shout(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output=arguments["text"].upper())


shout_tool = tool(shout, name="shout", version="1", input_schema=SCHEMA)
assert_type(word_count, DecoratedTool[ToolResult])
assert_type(fetch, DecoratedTool[Coroutine[Any, Any, ToolResult]])
assert_type(shout_tool, DecoratedTool[ToolResult])
every_tool: list[DecoratedTool] = [word_count, fetch, shout_tool]


async def call_tools(ctx: ToolContext) -> str | None:
    direct = word_count({"text": "a b"}, ctx)
    awaited = await fetch({"text": "a"}, ctx)
    return direct.output or awaited.output


server = create_sdk_mcp_server("text", tools=[word_count, fetch])
assert_type(server, SdkMcpServer)


class AsyncProvider:
    async def complete(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse(stop_reason="end_turn", content=[TextBlock(text="hi")])


class AskForBigTools:
    name = "ask-big"

    async def check(self, action: ProposedAction, ctx: GuardContext) -> VerdictResult:
        return VerdictResult(verdict="ask", reason="a human decides")


providers: list[LLMProvider] = [AsyncProvider(), FakeLLMProvider()]
guards: list[Guard] = [AskForBigTools()]
registry = Registry.of(tools=[word_count, fetch], providers=providers, guards=guards)
assert_type(registry.store(), ContentStore)

result = query(Options(system_prompt="Be terse."), goal="6 x 7?", provider=AsyncProvider(), workspace_dir=".")
assert_type(result, QueryResult)
assert_type(result.status, GoalStatus)
if result.status == "failed":
    print(result.answer())
for item in result.messages():
    if isinstance(item, Result):
        assert_type(item.status, ResultStatus)



class Quote(BaseModel):
    price: float


def positive_price(data: Quote) -> bool | str:
    return data.price >= 0 or "the price must not be negative"


async def any_answer(data: Any) -> bool:
    return True


validators: list[Validator] = [expect_validator(Quote, positive_price), expect_validator(any_answer, name="any")]
open_status: TaskStatus = "awaiting_approval"
decision = GuardDecision(call_id="c1", guard="ask-big", verdict="deny")
finish = Finish(answer="no", status="failed")
'''

MISUSE = '''
from typing import Any

from pydantic import BaseModel

from noeta.protocols.statuses import TaskStatus
from noeta.sdk import (
    Finish, LLMRequest, Options, ToolContext, ToolResult, VerdictResult, create_sdk_mcp_server, expect_validator,
    query, tool,
)

SCHEMA = {"type": "object"}


@tool(name="a", version=1, input_schema=SCHEMA)  # E: call-overload untyped-decorator
def version_not_a_string(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True)


@tool(name="b", input_schema=SCHEMA)  # E: call-overload untyped-decorator
def version_missing(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True)


@tool(name="c", version="1", input_schema=SCHEMA, risk_level="extreme")  # E: call-overload untyped-decorator
def unknown_risk(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True)


@tool(name="d", version="1", input_schema=SCHEMA)  # E: arg-type
def wrong_parameters(count: int) -> ToolResult:
    return ToolResult(success=True)


@tool(name="e", version="1", input_schema=SCHEMA)  # E: type-var
def returns_text(arguments: dict[str, Any], ctx: ToolContext) -> str:
    return "not a ToolResult"


def plain(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True)


server = create_sdk_mcp_server("s", tools=[plain])  # E: list-item


class TextProvider:
    def complete(self, request: LLMRequest) -> str:
        return "not an LLMResponse"


query(Options(), goal="g", provider=TextProvider())  # E: arg-type
query(Options(), goal="g", provider=42)  # E: arg-type
query(Options(), goal="g", retries=3)  # E: call-arg
result = query(Options(), goal="g")
if result.status == "succeeded":  # E: comparison-overlap
    pass
finish = Finish(answer="a", status="done")  # E: arg-type
verdict = VerdictResult(verdict="maybe")  # E: arg-type
status: TaskStatus = "finished"  # E: assignment


class Quote(BaseModel):
    price: float


def rules_for_text(data: str) -> bool:
    return bool(data)


validator = expect_validator(Quote, rules_for_text)  # E: arg-type
'''

_ERROR = re.compile(r"^(?P<file>[\w.]+):(?P<line>\d+): error: .*\[(?P<code>[\w-]+)\]$")


def expected_errors(source: str) -> dict[int, set[str]]:
    """``# E: code...`` markers: the error codes mypy must report on that line."""
    return {
        number: set(line.split("# E:", 1)[1].split())
        for number, line in enumerate(source.splitlines(), start=1)
        if "# E:" in line
    }


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """One strict mypy run over both programs: {file: {line: {codes}}}, and mypy's output."""
    assert importlib.util.find_spec("mypy") is not None, "mypy comes with the [test] extra"
    work = tmp_path_factory.mktemp("typing")
    (work / "correct_use.py").write_text(CORRECT)
    (work / "misuse.py").write_text(MISUSE)
    pytest_cache = getattr(request.config, "cache", None)  # absent with -p no:cacheprovider
    cache = pytest_cache.mkdir("mypy") if pytest_cache else work / ".mypy_cache"
    proc = subprocess.run(
        [
            sys.executable, "-m", "mypy", "--strict", "--config-file=", "--python-version=3.11",
            # Only the two programs are judged: errors inside noeta are `mypy noeta`'s business.
            "--follow-imports=silent", "--show-error-codes", "--no-error-summary", "--no-pretty",
            f"--cache-dir={cache}", "correct_use.py", "misuse.py",
        ],
        cwd=work, capture_output=True, text=True, timeout=240,
        env={**os.environ, "MYPYPATH": str(ROOT)},  # this checkout's noeta
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 2: mypy itself failed
    found: dict[str, dict[int, set[str]]] = {}
    for line in proc.stdout.splitlines():
        match = _ERROR.match(line)
        if match:
            found.setdefault(match["file"], {}).setdefault(int(match["line"]), set()).add(match["code"])
    return found, proc.stdout


def test_correct_use_of_the_public_api_type_checks(mypy_errors):
    found, output = mypy_errors
    assert found.get("correct_use.py", {}) == {}, output


def test_every_misuse_is_reported_at_its_line(mypy_errors):
    found, output = mypy_errors
    assert found.get("misuse.py", {}) == expected_errors(MISUSE), output

