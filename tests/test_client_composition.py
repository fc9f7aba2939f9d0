"""The clients are facades composed of parts, not one class split across mixin files: a call a
part serves whole is that part's method, forwarded (noeta.client.forwarding), with the part's
signature and docstring wherever a caller or a type checker looks."""

from __future__ import annotations

import asyncio
import inspect
import pydoc
from typing import Any

import pytest

from noeta.client.client import AsyncClient
from noeta.client.forwarding import Forwarded
from noeta.client.sync import Client
from noeta.client.sync_schedules import SyncScheduleCalls
from noeta.client.sync_session import SyncSession


def forwarded_calls(facade: type) -> dict[str, Forwarded[..., Any]]:
    return {name: value for name, value in vars(facade).items() if isinstance(value, Forwarded)}


@pytest.mark.parametrize("facade", [AsyncClient, Client])
def test_the_clients_inherit_nothing(facade: type) -> None:
    assert facade.__bases__ == (object,)


def test_the_async_client_forwards_its_starts_schedules_and_threads() -> None:
    calls = forwarded_calls(AsyncClient)
    assert {name: call.part for name, call in calls.items()} == {
        "start": "_starts", "fork": "_starts", "agent_options": "_starts", "send": "_threads",
        **{name: "_schedules" for name in (
            "create_schedule", "list_schedules", "describe_schedule", "pause_schedule", "unpause_schedule",
            "trigger_schedule", "backfill_schedule", "delete_schedule", "schedule_runs",
        )},
    }
    # Each is the part's method under its own name, with its signature and docstring.
    for name, call in calls.items():
        assert call.method.__name__ == name
        assert call.__doc__ and call.__doc__ == call.method.__doc__
        assert inspect.signature(getattr(AsyncClient, name)) == inspect.signature(call.method)
    assert "agent" in inspect.signature(AsyncClient.start).parameters
    assert "Start a task and return its id" in pydoc.render_doc(AsyncClient.start)


def test_the_sync_client_forwards_its_schedule_calls() -> None:
    calls = forwarded_calls(Client)
    assert set(calls) == {
        "create_schedule", "list_schedules", "describe_schedule", "pause_schedule", "unpause_schedule",
        "trigger_schedule", "backfill_schedule", "delete_schedule", "schedule_runs",
    }
    assert {call.part for call in calls.values()} == {"_schedules"}


class _Part:
    def __init__(self, tag: str) -> None:
        self.tag = tag

    def greet(self, name: str, *, loud: bool = False) -> str:
        """Greets ``name``."""
        text = f"{self.tag}: hello {name}"
        return text.upper() if loud else text


class _Facade:
    greet = Forwarded("_part", _Part.greet)

    def __init__(self, tag: str) -> None:
        self._part = _Part(tag)


def test_a_forwarded_call_is_the_parts_bound_method() -> None:
    one, two = _Facade("one"), _Facade("two")
    assert one.greet("ann") == "one: hello ann"
    assert two.greet("bob", loud=True) == "TWO: HELLO BOB"
    assert one.greet.__self__ is one._part  # type: ignore[attr-defined]
    assert _Facade.greet.__doc__ == "Greets ``name``."
    # Replacing the part (or the call, on one facade) is seen at once: nothing is bound early.
    one._part = _Part("new")
    assert one.greet("ann") == "new: hello ann"
    one.greet = lambda name, *, loud=False: "stubbed"
    assert one.greet("ann") == "stubbed" and two.greet("ann") == "two: hello ann"
    assert _Facade.greet(two, "cy") == "two: hello cy"  # taken from the class, as a method is


def test_the_sync_schedule_calls_hold_the_session_not_the_client() -> None:
    """The sync client's part reaches the AsyncClient through the session, which closing clears:
    holding the client (or a bound method of it) would keep its runtime past close()."""
    loop = asyncio.new_event_loop()
    try:
        session = SyncSession(loop)
        calls = SyncScheduleCalls(session)
        assert not any(isinstance(value, Client) for value in vars(calls).values())
        with pytest.raises(RuntimeError, match="this Client is closed"):
            calls.list_schedules()
    finally:
        loop.close()
