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


#: A provider as a user points one at a server: OpenAI's wire protocol, on 127.0.0.1.
_PROVIDER_SERVER = textwrap.dedent("""
    import json, threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from noeta.sdk import Options, query
    from noeta.providers.openai import OpenAIProvider

    def serving(status, answer):
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                message = {"role": "assistant", "content": answer}
                body = {"error": {"message": "overloaded", "type": "server_error"}} if status != 200 else {
                    "id": "c", "object": "chat.completion", "created": 1, "model": "m",
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}
                data = json.dumps(body).encode()
                self.send_response(status)
                for key, value in (("content-type", "application/json"), ("content-length", str(len(data))),
                                   ("retry-after-ms", "20")):
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}/v1"
""")

#: A provider whose call outlives its attempt (a hung upstream): the task goes on without it while
#: its thread runs on. That thread once held the activity, and through it the worker and the runtime.
_OUTLIVED = textwrap.dedent("""
    import time

    def outlived(seconds=30):
        time.sleep(seconds)
""")

#: query() scripts on the paths that once ended with a runtime still referenced at exit: a task
#: that failed over to its fallback provider (its primary hung past the attempt), one that
#: compacted (its first summarizing call hung past its attempt), one forked, one replayed.
PATH_SCRIPTS = {
    "fallback": _PROVIDER_SERVER + _OUTLIVED + textwrap.dedent("""
        from noeta.sdk import ActivityOptions

        class Hung:
            def complete(self, request):
                outlived()

        backup = OpenAIProvider(base_url=serving(200, "from the backup"), api_key="k", model="m", name="backup")
        options = Options(provider=Hung(), max_retries=0, model_activity=ActivityOptions(start_to_close_seconds=2),
                          fallback_providers=[backup])
        result = query(options, goal="hi")
        print(result.answer(), [u.provider for u in result.usage_by_provider], flush=True)
    """),
    "compaction": _OUTLIVED + textwrap.dedent("""
        from noeta.sdk import ActivityOptions, Options, query
        from tests.support.windowed import WindowedProvider, fetch

        class FirstSummaryHangs(WindowedProvider):
            def complete(self, request):
                if request.metadata.get("purpose") == "compaction" and not self.summaries and not getattr(self, "hung", 0):
                    self.hung = 1
                    outlived()
                return super().complete(request)

        provider = FirstSummaryHangs(window=3000, turns=12, name="windowed")
        options = Options(provider=provider, allowed_tools=[fetch], max_turns=20, context_window_tokens=3000,
                          model_activity=ActivityOptions(start_to_close_seconds=3))
        result = query(options, goal="fetch")
        compacted = [e for e in result.events if e.type == "ContextCompacted"]
        print(result.answer(), bool(compacted) and len(compacted) == len(provider.summaries), flush=True)
    """),
    "fork": textwrap.dedent("""
        from noeta.sdk import Client, LLMResponse, Options, TextBlock, ToolUseBlock, query
        from noeta.sdk.testing import FakeLLMProvider
        from tests.support.tools import add

        turns = [LLMResponse(stop_reason="tool_use", content=[ToolUseBlock("c1", "add", {"a": 1, "b": 2})]),
                 LLMResponse(stop_reason="end_turn", content=[TextBlock("3")])]
        result = query(Options(allowed_tools=[add]), goal="add", provider=FakeLLMProvider(responses=turns))
        with Client() as client:  # a fork of the finished task, on a queue nobody serves: started, then cancelled
            fork_id = client.fork(result.task_id, at_turn=2, task_queue="nobody-polls-this")
            client.cancel(fork_id)
        print(result.answer(), fork_id != result.task_id, flush=True)
    """),
    "replay": textwrap.dedent("""
        from noeta.sdk import LLMResponse, Options, TextBlock, query
        from noeta.sdk.testing import FakeLLMProvider, replay

        said = LLMResponse(stop_reason="end_turn", content=[TextBlock("ok")])
        result = query(Options(), goal="Say ok.", provider=FakeLLMProvider(responses=[said]))
        report = replay([result.task_id], provider=FakeLLMProvider(responses=[said]))
        print(result.answer(), report.turns, len(report.changed), flush=True)
    """),
}
#: A wait that looks at its task's queue at once, as every wait longer than FIRST_LOOK_SECONDS does
#: (a loaded machine's): the answer kept for the process's other waits once held the client, and
#: through it the runtime, past the script's end.
LOOK_AT_ONCE = textwrap.dedent("""
    import noeta.client.pollers
    noeta.client.pollers.FIRST_LOOK_SECONDS = 0.0
""")
#: What each of PATH_SCRIPTS prints before the exit check.
PATH_LINES = {
    "fallback": "from the backup ['backup']",
    "compaction": "fetched 12 chunks True",
    "fork": "3 True",
    "replay": "ok 1 0",
}


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


@pytest.mark.parametrize("path", sorted(PATH_SCRIPTS))
def test_query_scripts_on_every_path_exit_without_a_runtime_left(temporal_server, tmp_path: Path, path: str):
    """A task that failed over, compacted, was forked or replayed: the script's exit stops the
    runtime at once, with no "still referenced" warning and no runtime thread left, also after the
    wait looked at the task's queue."""
    proc = run_script(AT_EXIT_CHECK + LOOK_AT_ONCE + PATH_SCRIPTS[path], temporal_server.address, tmp_path / "home")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "still referenced" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    assert own_lines(proc.stdout) == [PATH_LINES[path], "at exit 0"], proc.stderr[-3000:]
