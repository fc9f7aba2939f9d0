"""``instrument(client, name=..., ops=[...], derive=...)``: observe the calls a tool makes on a
client without changing the tool (seed: ``instrument(client, { name, ops, derive })``).

Each call of a listed op is timed and recorded as a :class:`~noeta.protocols.resources.ResourceCall`
(op, duration, outcome, derived fields): inside a tool call it is returned with the tool's result,
so it is in history and the task's event log shows it (``ResourceCallObserved``); it also becomes a
span when tracing is on, and goes to ``on_call`` when given. Works for sync and async clients.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic_core import to_jsonable_python

from noeta.errors import ConfigurationError
from noeta.protocols.resources import ResourceCall
from noeta.resources.context import recorder
from noeta.telemetry.instrument import end_resource_span, start_resource_span

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class ObservedCall:
    """One call of an instrumented op, as ``derive`` sees it."""

    op: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    result: Any = None
    error: BaseException | None = None


Derive = Callable[[ObservedCall], Mapping[str, Any]]


class Instrumented:
    """A transparent proxy: listed ops are observed, everything else is the client's own."""

    __slots__ = ("_client", "_name", "_ops", "_derive", "_on_call")

    def __init__(self, client: Any, name: str, ops: frozenset[str], derive: Derive | None,
                 on_call: Callable[[ResourceCall], Any] | None) -> None:
        """Wraps ``client`` under ``name``; calls of the methods in ``ops`` are timed and handed to
        ``on_call`` (with the fields ``derive`` adds)."""
        object.__setattr__(self, "_client", client)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_ops", ops)
        object.__setattr__(self, "_derive", derive)
        object.__setattr__(self, "_on_call", on_call)

    def __getattr__(self, attr: str) -> Any:
        """The client's attribute; a method listed in ``ops`` comes back observed."""
        value = getattr(self._client, attr)
        if attr not in self._ops or not callable(value):
            return value

        def observed(*args: Any, **kwargs: Any) -> Any:
            return self._observe(attr, value, args, kwargs)

        return observed

    def __setattr__(self, attr: str, value: Any) -> None:
        """Set the attribute on the client itself."""
        setattr(self._client, attr, value)

    def __repr__(self) -> str:
        """Name the wrapped client and the resource name."""
        return f"instrument({self._client!r}, name={self._name!r})"

    def _observe(self, op: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        span = start_resource_span(self._name, op)
        started = time.perf_counter()
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            self._record(span, ObservedCall(op, args, kwargs, error=exc), started)
            raise
        if inspect.isawaitable(result):
            return self._observe_async(span, op, args, kwargs, result, started)
        self._record(span, ObservedCall(op, args, kwargs, result=result), started)
        return result

    async def _observe_async(self, span: Any, op: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                             pending: Any, started: float) -> Any:
        try:
            result = await pending
        except BaseException as exc:
            self._record(span, ObservedCall(op, args, kwargs, error=exc), started)
            raise
        self._record(span, ObservedCall(op, args, kwargs, result=result), started)
        return result

    def _record(self, span: Any, call: ObservedCall, started: float) -> None:
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        fields: dict[str, Any] = {}
        if self._derive is not None:
            try:
                derived = self._derive(call)
                fields = {str(k): to_jsonable_python(v, fallback=str) for k, v in dict(derived or {}).items()}
            except Exception as err:  # a broken derive must not break the tool's call
                logger.warning("derive of %s.%s raised %r", self._name, call.op, err)
                fields = {"derive_error": f"{type(err).__name__}: {err}"}
        record = ResourceCall(
            resource=self._name,
            op=call.op,
            duration_ms=duration_ms,
            outcome="ok" if call.error is None else "error",
            error_type=type(call.error).__name__ if call.error is not None else None,
            fields=fields,
        )
        end_resource_span(span, record)
        collected = recorder()
        if collected is not None:
            collected.add(record)
        if self._on_call is not None:
            try:
                self._on_call(record)
            except Exception:
                logger.exception("on_call of instrumented resource %r raised", self._name)


def instrument(
    client: T,
    *,
    name: str,
    ops: Sequence[str],
    derive: Derive | None = None,
    on_call: Callable[[ResourceCall], Any] | None = None,
) -> T:
    """Wrap ``client`` so each call of ``ops`` is observed; returns a proxy used like the client."""
    if not isinstance(name, str) or not name:
        raise ConfigurationError("instrument: name must be a non-empty string")
    if isinstance(ops, str) or not ops:
        raise ConfigurationError("instrument: ops must be a non-empty list of method names")
    missing = [op for op in ops if not callable(getattr(client, op, None))]
    if missing:
        raise ConfigurationError(f"instrument({name!r}): the client has no method(s) {', '.join(missing)}")
    if derive is not None and not callable(derive):
        raise ConfigurationError(f"instrument({name!r}): derive must be callable")
    return Instrumented(client, name, frozenset(ops), derive, on_call)  # type: ignore[return-value]


__all__ = ["Instrumented", "ObservedCall", "instrument"]
