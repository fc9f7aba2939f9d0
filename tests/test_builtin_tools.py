"""The safe built-in tools: arithmetic without eval, word count, workspace-only file reads, time, wait."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

from noeta.builtins.tools import (
    BUILTIN_TOOLS,
    MAX_FILE_BYTES,
    calculator,
    current_time,
    evaluate,
    read_file,
    resolve_in_workspace,
    wait,
    word_count,
)
from noeta.client.messages import ToolResultView
from noeta.client.options import Options
from noeta.errors import ToolInputError
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.testing import FakeLLMProvider
from tests.support.scripts import call, say


def ctx(workspace: Path | None = None, name: str = "t") -> ToolContext:
    return ToolContext(task_id="t", call_id="c1", tool_name=name, attempt=1,
                       workspace_dir=str(workspace) if workspace else None)


@pytest.mark.parametrize(
    ("expression", "value"),
    [("37 * 91", 3367), ("(15 + 27) * 3", 126), ("2 ** 10", 1024), ("2^10", 1024), ("7 / 2", 3.5),
     ("-3 + 4 % 3", -2), ("17 // 5", 3), ("1.5 * 4", 6.0), ("6 × 7", 42)],
)
def test_evaluate_computes_arithmetic(expression: str, value: float) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os').system('echo pwned')", "only numbers and + - * / // % ** ( ) are allowed, not Call"),
        ("x + 1", "only numbers and + - * / // % ** ( ) are allowed, not Name"),
        ("(1).__class__", "only numbers and + - * / // % ** ( ) are allowed, not Attribute"),
        ("'a' * 3", "only numbers and + - * / // % ** ( ) are allowed, not Constant"),
        ("True + 1", "only numbers and + - * / // % ** ( ) are allowed, not Constant"),
        ("1 / 0", "division by zero"),
        ("9 ** 9 ** 9", "exponent 387420489 is larger than 1000"),
        ("10 ** 1000", "the result is too large"),
        ("(-8) ** 0.5", "the result is not a real number"),
        ("2 +", "not an arithmetic expression: '2 +'"),
        ("", "empty expression"),
        ("1+" * 150 + "1", "expression longer than 200 characters"),
    ],
)
def test_evaluate_refuses_anything_but_arithmetic(expression: str, message: str) -> None:
    with pytest.raises(ToolInputError) as info:
        evaluate(expression)
    assert type(info.value) is ToolInputError and str(info.value) == message


def test_calculator_returns_refusals_to_the_model_as_failed_results() -> None:
    assert calculator({"expression": "37 * 91"}, ctx()) == ToolResult(
        success=True, output="3367", summary="37 * 91 = 3367"
    )
    assert calculator({"expression": "7 / 2"}, ctx()).output == "3.5"
    assert calculator({"expression": "open('x')"}, ctx()) == ToolResult(
        success=False, output="only numbers and + - * / // % ** ( ) are allowed, not Call"
    )


def test_word_count() -> None:
    assert word_count({"text": "durable execution  survives\ncrashes"}, ctx()).output == "4"
    assert word_count({"text": "   "}, ctx()).output == "0"


def test_read_file_reads_inside_the_workspace_only(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    (workspace / "notes.txt").write_text("Buy milk.")
    (workspace / "sub" / "deep.txt").write_text("deep")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    (workspace / "escape").symlink_to(secret)

    assert read_file({"path": "notes.txt"}, ctx(workspace)).output == "Buy milk."
    assert read_file({"path": "sub/../sub/deep.txt"}, ctx(workspace)).output == "deep"
    for path in ("../secret.txt", str(secret), "escape", "sub/../../secret.txt"):
        result = read_file({"path": path}, ctx(workspace))
        assert result == ToolResult(success=False, output=f"{path!r} is outside the workspace")
    assert read_file({"path": "missing.txt"}, ctx(workspace)) == ToolResult(
        success=False, output="no file 'missing.txt' in the workspace"
    )
    assert read_file({"path": "sub"}, ctx(workspace)).success is False
    assert secret.read_text() == "do not read"  # nothing touched
    with pytest.raises(ToolInputError):
        resolve_in_workspace(workspace, "../secret.txt")


def test_read_file_truncates_large_files(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * (MAX_FILE_BYTES + 10))
    output = read_file({"path": "big.txt"}, ctx(tmp_path)).output
    assert output == "x" * MAX_FILE_BYTES + f"\n[truncated at {MAX_FILE_BYTES} bytes]"


def test_read_file_defaults_to_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "here.txt").write_text("here")
    monkeypatch.chdir(tmp_path)
    assert read_file({"path": "here.txt"}, ctx(None)).output == "here"


def test_current_time_is_utc() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", current_time({}, ctx()).output or "")


async def test_wait_waits_and_refuses_out_of_range() -> None:
    assert await wait({"seconds": 0.01}, ctx()) == ToolResult(success=True, output="waited 0.01 seconds")
    assert await wait({"seconds": 1000}, ctx()) == ToolResult(success=False, output="seconds must be between 0 and 300")
    assert wait.heartbeat_seconds is not None  # a killed worker is noticed quickly


async def test_a_durable_task_gets_a_refused_read_back_as_a_failed_result(client, serve, task_queue, tmp_path):
    (tmp_path / "notes.txt").write_text("kept")
    provider = FakeLLMProvider(
        responses=[call(("c1", "read_file", {"path": "../../etc/passwd"}), ("c2", "read_file", {"path": "notes.txt"})),
                   say("done")]
    )
    async with serve(tools=BUILTIN_TOOLS, providers=[provider]):
        task_id = await client.start(
            "read", Options(provider=provider, allowed_tools=list(BUILTIN_TOOLS)),
            task_queue=task_queue, workspace_dir=tmp_path,
        )
        result = await asyncio.wait_for(client.result(task_id), 60)
    assert (result.status, result.answer) == ("completed", "done")
    views = [i for i in await client.messages(task_id) if isinstance(i, ToolResultView)]
    assert views == [
        ToolResultView("c1", "read_file", False, "'../../etc/passwd' is outside the workspace"),
        ToolResultView("c2", "read_file", True, "kept"),
    ]
    assert os.path.exists(tmp_path / "notes.txt")
