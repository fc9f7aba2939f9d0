"""The fast tier (``python -m pytest -m fast -n 0``): marked by the fixtures a test uses, and
checked while it runs — a fast test that starts a process, a Temporal dev server included, fails."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import SPAWNS
from tests.support.tiers import SERVER_FIXTURES


def test_a_fast_test_that_starts_a_process_is_stopped_and_failed(request: pytest.FixtureRequest):
    assert request.node.get_closest_marker("fast") is not None
    with pytest.raises(RuntimeError, match="in the fast tier but starts a process"):
        subprocess.run(["temporal", "server", "start-dev", "--headless"], check=False)
    # The start is remembered even where a test catches the error: it would fail this test's
    # report. Taken back here, so that this test passes.
    assert "temporal server start-dev" in (SPAWNS.failure(request.node.nodeid) or "")


def test_a_test_with_a_server_fixture_or_the_server_marker_is_not_fast(request: pytest.FixtureRequest):
    items = request.session.items
    for item in items:
        slow_by_fixture = bool(SERVER_FIXTURES.intersection(item.fixturenames))
        if slow_by_fixture or item.get_closest_marker("server") is not None:
            assert item.get_closest_marker("fast") is None, item.nodeid
        else:
            assert item.get_closest_marker("fast") is not None, item.nodeid


@pytest.mark.server
def test_a_test_marked_server_may_start_a_process(request: pytest.FixtureRequest):
    assert request.node.get_closest_marker("fast") is None
    assert subprocess.run(["true"], check=False).returncode == 0
    assert SPAWNS.failure(request.node.nodeid) is None


def test_the_client_fixture_is_a_server_fixture(client_fixture_closure: list[str]):
    assert SERVER_FIXTURES.intersection(client_fixture_closure)


@pytest.fixture
def client_fixture_closure(request: pytest.FixtureRequest) -> list[str]:
    """Every fixture ``client`` needs, as pytest resolves it (without starting any)."""
    names, _definitions = request.session._fixturemanager.getfixtureclosure(request.node, ("client",), ignore_args=set())
    return names
