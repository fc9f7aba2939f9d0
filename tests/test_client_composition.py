"""The clients are facades composed of parts, not one class split across mixin files: a call a
part serves whole is that part's method, forwarded (noeta.client.forwarding), with the part's
signature and docstring wherever a caller or a type checker looks."""

from __future__ import annotations

import asyncio
import inspect
import pydoc
from typing import Any

import pytest

from noeta.client.blocking import Blocking, SyncSession
from noeta.client.client import AsyncClient
from noeta.client.forwarding import Forwarded, Shared
from noeta.client.start_request import StartAs, StartKeywords
from noeta.client.sync import Client


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


def test_the_sync_client_blocks_on_the_async_clients_own_calls() -> None:
    """Each blocking call is the AsyncClient's call of the same name, with its signature and
    docstring: a keyword added to the AsyncClient is the synchronous client's too."""
    calls = {name: value for name, value in vars(Client).items() if isinstance(value, Blocking)}
    assert set(forwarded_calls(AsyncClient)) - {"agent_options"} <= set(calls)
    assert {"result", "approve", "cancel", "list_tasks", "export", "messages"} <= set(calls)
    for name, call in calls.items():
        assert call.__name__ == name
        assert call.__doc__ and call.__doc__ == getattr(AsyncClient, name).__doc__
        assert inspect.signature(getattr(Client, name)) == inspect.signature(getattr(AsyncClient, name))
    assert "agent" in inspect.signature(Client.start).parameters


@pytest.mark.parametrize("name", ["start", "fork", "send", "create_schedule"])
def test_every_call_that_starts_a_task_takes_the_same_start_keywords(name: str) -> None:
    """Who starts a task is declared once (StartKeywords) and taken as ``**start_as`` by both
    clients' starting calls: their keywords cannot drift apart."""
    for facade in (AsyncClient, Client):
        keywords = inspect.signature(getattr(facade, name)).parameters["start_as"]
        assert keywords.kind is inspect.Parameter.VAR_KEYWORD
        assert keywords.annotation == "Unpack[StartKeywords]"
    assert StartKeywords.__optional_keys__ == {"task_queue", "api_key_id", "tenant", "identity"}
    assert StartKeywords.__required_keys__ == frozenset()


def test_a_start_keyword_that_is_not_one_is_refused_by_name() -> None:
    assert StartAs.given({"tenant": "acme", "identity": "ann"}) == StartAs(tenant="acme", identity="ann")
    with pytest.raises(TypeError, match="'tennant'.*a start takes api_key_id, identity, task_queue, tenant"):
        StartAs.given({"tennant": "acme"})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(TypeError, match="'eval_id'"):  # the eval runner's own, not a caller's
        StartAs.given({"eval_id": "e1"})  # type: ignore[typeddict-unknown-key]


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


class _Settings:
    def __init__(self) -> None:
        self.queue = "q1"
        self._tags: tuple[str, ...] = ()

    @property
    def tags(self) -> tuple[str, ...]:
        return self._tags

    @tags.setter
    def tags(self, tags: list[str] | tuple[str, ...]) -> None:
        self._tags = tuple(tags)


class _HoldingFacade:
    queue = Shared[str]("_settings", "queue", "The queue.")
    tags = Shared[tuple[str, ...], list[str] | tuple[str, ...]]("_settings", "tags", "The tags.")

    def __init__(self) -> None:
        self._settings = _Settings()


def test_a_shared_attribute_is_the_one_its_part_holds() -> None:
    facade = _HoldingFacade()
    assert facade.queue == "q1"
    facade.queue = "q2"
    assert facade._settings.queue == "q2" and "queue" not in vars(facade)
    facade.tags = ["a", "b"]  # the part converts what it is given
    assert facade._settings.tags == ("a", "b") == facade.tags
    assert isinstance(_HoldingFacade.queue, Shared) and _HoldingFacade.queue.__doc__ == "The queue."
    assert "The tags." in pydoc.render_doc(_HoldingFacade)
    # The real client: each setting is its part's, one object wherever it is read.
    for name, part, attribute in [
        ("content_store", "_inspection", "content_store"), ("task_queue", "_tasks", "task_queue"),
        ("agents", "_starts", "agents"), ("observers", "_observation", "observers"),
        ("indexed_metadata", "_tasks", "indexed_metadata"), ("ui_url", "_listing", "ui_url"),
    ]:
        shared = inspect.getattr_static(AsyncClient, name)
        assert isinstance(shared, Shared) and (shared.part, shared.name) == (part, attribute), name
        assert shared.__doc__, name


def test_a_blocking_call_holds_the_session_not_the_client() -> None:
    """A blocking call reaches the AsyncClient through the session, which closing clears: holding
    the client (or a bound method of it) would keep its runtime past close()."""
    loop = asyncio.new_event_loop()
    try:
        facade = _SyncFacade(SyncSession(loop))
        call = facade.list_schedules
        assert not any(isinstance(cell.cell_contents, _SyncFacade) for cell in call.__closure__ or ())
        with pytest.raises(RuntimeError, match="this Client is closed"):
            call()
    finally:
        loop.close()


class _SyncFacade:
    list_schedules = Blocking(AsyncClient.list_schedules)

    def __init__(self, session: SyncSession) -> None:
        self._session = session


#: AsyncClient's public names the synchronous client reaches through ``client.aio`` instead: its
#: settings (properties), the Temporal client, and the async constructor.
THROUGH_AIO = {
    "connect", "temporal", "content_store", "encrypted", "task_queue", "observers", "indexed_metadata", "ui_url",
}


def test_the_sync_client_has_every_call_of_the_async_client() -> None:
    """The docstring's promise, "the same calls": a call added to AsyncClient and not to Client
    fails here."""
    async_calls = {name for name in dir(AsyncClient) if not name.startswith("_")} - THROUGH_AIO
    assert async_calls - set(dir(Client)) == set()
    for name in THROUGH_AIO - {"connect"}:
        assert isinstance(inspect.getattr_static(AsyncClient, name), (property, Shared)), name
    # The calls that do not wait are the AsyncClient's own too, same signature.
    for name in ("task_url", "agent_options"):
        assert inspect.signature(getattr(Client, name)) == inspect.signature(getattr(AsyncClient, name))
