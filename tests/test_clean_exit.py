"""Scripts that use ``query()`` or the synchronous ``Client`` exit cleanly: no Temporal runtime
thread is left running when the interpreter finalizes (one that called into Python then aborted
the process, "Fatal Python error: PyGILState_Release ... finalizing", see noeta.client.runtime).
They share one runtime per process, which Noeta's exit hook stops."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from temporalio.runtime import Runtime, TelemetryConfig

from noeta.client import runtime as runtime_module
from noeta.client.runtime import release, shared_runtime
from tests.support.processes import ROOT

#: Counts the Temporal runtime threads alive; registered first, the exit hook at its end runs after
#: Noeta's (exit hooks run last registered first) and prints what that hook left.
AT_EXIT_CHECK = textwrap.dedent("""
    import atexit, os

    def runtime_threads():
        names = (open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task"))
        return sum(1 for name in names if name.startswith("tokio"))

    def at_exit():  # a runtime's threads end a moment after it is dropped
        import time
        for _ in range(150):  # a loaded machine has taken over 5 s; a leaked runtime never ends
            if runtime_threads() == 0:
                break
            time.sleep(0.1)
        print("at exit", runtime_threads(), flush=True)

    atexit.register(at_exit)
""")

#: A query() whose task fails in prepare_task (its tool needs a resource nobody provides).
FAILING_QUERY_CALL = textwrap.dedent("""
    from noeta.sdk import LLMResponse, Options, ResourceNotFoundError, TextBlock, ToolResult, query, tool
    from noeta.sdk.testing import FakeLLMProvider

    @tool(name="list_users", version="1", input_schema={"type": "object"}, resources=["database"])
    def list_users(arguments, ctx):
        return ToolResult(success=True, output="never")

    def failing_query():
        provider = FakeLLMProvider(responses=[LLMResponse(stop_reason="end_turn", content=[TextBlock("no")])])
        query(Options(allowed_tools=[list_users]), goal="Who are the users?", provider=provider)
""")

#: What the stress runs do: that query() is the last thing the script does.
FAILING_QUERY = AT_EXIT_CHECK + FAILING_QUERY_CALL + textwrap.dedent("""
    try:
        failing_query()
    except ResourceNotFoundError as err:
        print(type(err).__name__, err.key)
""")

#: The same query() with its error left uncaught: the interpreter keeps that error (and through its
#: traceback the call's client and runtime) until it finalizes.
UNCAUGHT_QUERY = AT_EXIT_CHECK + FAILING_QUERY_CALL + "failing_query()\n"

#: Each way of using Noeta synchronously, one after the other, all on the process's one runtime.
THREADS = AT_EXIT_CHECK + textwrap.dedent("""
    import gc
    from temporalio.runtime import Runtime
    from noeta.sdk import Client, LLMResponse, Options, ResourceNotFoundError, TextBlock, ToolResult, query, tool
    from noeta.sdk.testing import FakeLLMProvider

    def runtimes():
        return sum(1 for o in gc.get_objects() if isinstance(o, Runtime))

    @tool(name="list_users", version="1", input_schema={"type": "object"}, resources=["database"])
    def list_users(arguments, ctx):
        return ToolResult(success=True, output="never")

    try:
        query(Options(allowed_tools=[list_users]), goal="Who?", provider=FakeLLMProvider(responses=[]))
    except ResourceNotFoundError as err:
        print("failed query", runtimes(), flush=True)
    reply = LLMResponse(stop_reason="end_turn", content=[TextBlock("ok")])
    result = query(Options(), goal="Say ok.", provider=FakeLLMProvider(responses=[reply]))
    print("query", result.answer(), runtimes(), flush=True)
    with Client() as client:
        client.list_tasks(limit=1)
        task_id = client.start("Wait here.", Options(), task_queue="nobody-polls-this")
        try:
            client.start("Wait there.", Options(), task_id=task_id, task_queue="nobody-polls-this")
        except Exception as err:  # the id is taken by another task: a start that fails on the server
            print("failed start", type(err).__name__, runtimes(), flush=True)
        client.cancel(task_id)
    print("client closed", runtimes(), flush=True)
    try:
        client.list_tasks()
    except RuntimeError as err:
        print(err, flush=True)
    left_open = Client()
    print("client left open", runtimes(), flush=True)
""")


def own_lines(stdout: str) -> list[str]:
    """The lines a test script printed itself (the Temporal core's log lines left out)."""
    return [line for line in stdout.splitlines() if "temporalio_sdk_core" not in line]


def run_script(code: str, address: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "NOETA_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=home.parent, env=env, capture_output=True, text=True,
                          timeout=240)


def test_query_and_the_sync_client_share_one_runtime_that_stops_at_exit(temporal_server, tmp_path: Path):
    proc = run_script(THREADS, temporal_server.address, tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    lines = own_lines(proc.stdout)
    assert lines[:3] == ["failed query 1", "query ok 1", "failed start TaskAlreadyExistsError 1"], proc.stderr
    assert lines[3:] == [
        "client closed 1",  # the runtime is the process's: it outlives the client
        "this Client is closed",
        "client left open 1",
        "at exit 0",  # Noeta's exit hook closed the client left open, then stopped the runtime
    ], proc.stderr


def test_scripts_ending_with_a_failed_query_never_abort_at_exit(temporal_server, tmp_path: Path):
    """With temporalio's default runtime about one run in 40 (up to one in 10 on a loaded machine)
    aborted with -6, and with a runtime released after each query() one in a few hundred kept its
    threads. The test above is the guard on each way in; this one runs the real exit path a dozen
    times on a loaded machine, and each run must leave no runtime thread."""
    runs = 12

    def one(i: int) -> tuple[int, str, str]:
        proc = run_script(FAILING_QUERY, temporal_server.address, tmp_path / f"home-{i}")
        return proc.returncode, proc.stdout, proc.stderr

    with ThreadPoolExecutor(4) as pool:  # 4 at a time: the machine stays loaded, the test short
        results = list(pool.map(one, range(runs)))
    failures = [(code, err[-600:]) for code, _, err in results if code != 0]
    assert failures == [], f"{len(failures)} of {runs} runs failed: {failures[:2]}"
    # Only the script's own lines count: on a loaded machine the Temporal core may log a warning (a
    # slow workflow task) to stdout as well.
    expected = ["ResourceNotFoundError database", "at exit 0"]
    left = [(out, err[-1500:]) for _, out, err in results if own_lines(out) != expected]
    assert left == [], f"{len(left)} of {runs} runs left runtime threads: {left[:1]}"


def test_a_script_whose_query_error_is_not_caught_still_stops_the_runtime(temporal_server, tmp_path: Path):
    proc = run_script(UNCAUGHT_QUERY, temporal_server.address, tmp_path / "home")
    assert proc.returncode == 1 and "ResourceNotFoundError" in proc.stderr
    assert own_lines(proc.stdout) == ["at exit 0"], proc.stderr


class _HeldElsewhere:
    """A runtime inside a cycle (as a worker and its client hold theirs) that a timer thread holds
    for ``seconds``, as a runtime thread holds the worker's last poll a moment after the worker
    has returned."""

    def __init__(self, runtime: Any, seconds: float) -> None:
        self.held: list[Any] = [{"runtime": runtime}]
        self.held[0]["cycle"] = self.held[0]
        self.timer = threading.Timer(seconds, self.let_go)
        self.timer.start()

    def let_go(self) -> None:
        self.timer.cancel()
        self.held.clear()


def private_runtime() -> tuple[Runtime, weakref.ref[Runtime]]:
    runtime = Runtime(telemetry=TelemetryConfig())
    return runtime, weakref.ref(runtime)


def test_the_shared_runtime_is_one_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    first = shared_runtime()
    assert shared_runtime() is first
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as in a forked child: a runtime is not usable there
    assert shared_runtime() is not first


def test_release_waits_for_a_reference_held_a_moment_longer() -> None:
    runtime, alive = private_runtime()
    holder = _HeldElsewhere(runtime, 0.3)
    del runtime
    release(alive)  # one collection alone leaves it alive: the cycle is still reachable then
    assert alive() is None
    holder.timer.join()


def test_release_gives_up_with_a_warning(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(runtime_module, "RELEASE_SECONDS", 0.2)
    runtime, alive = private_runtime()
    holder = _HeldElsewhere(runtime, 60)
    del runtime
    with caplog.at_level(logging.WARNING, logger="noeta.client.runtime"):
        assert release(alive) is False
    assert alive() is not None
    assert "still referenced" in caplog.text
    assert "held by: dict" in caplog.text and "list" in caplog.text  # the holder's chain, by type
    holder.let_go()
    release(alive)
    assert alive() is None
