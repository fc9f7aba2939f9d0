"""A facade's public call that one of its parts serves: composition without restating a signature.

``AsyncClient`` and ``Client`` are facades over small parts (task operations, starts, schedules,
...). Writing ``async def create_schedule(self, schedule_id, goal, ..., identity=None)`` on the facade
only to call the part with the same arguments would state each signature twice; inheriting the parts
as mixins would split one class across files. ``start = Forwarded("_starts", StartCalls.start)`` instead
names the part and its method once: the facade's attribute is that part's bound method, so callers,
mypy and ``help()`` see the part's own signature and docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")


class Forwarded(Generic[P, R]):
    """The method ``method`` of the facade's part in attribute ``part``, as the facade's own."""

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]) -> None:
        """``part``: the facade's attribute holding the part; ``method``: the part's class's method."""
        self.part = part
        self.method = method
        self.__name__ = method.__name__
        self.__doc__ = method.__doc__
        self.__wrapped__ = method  # inspect.signature and help() show the part's signature

    @overload
    def __get__(self, facade: None, owner: type[Any]) -> Forwarded[P, R]: ...

    @overload
    def __get__(self, facade: object, owner: type[Any] | None = None) -> Callable[P, R]: ...

    def __get__(self, facade: object | None, owner: type[Any] | None = None) -> Forwarded[P, R] | Callable[P, R]:
        """On the class: this descriptor (called with a facade, as a method is); on a facade: the
        part's bound method."""
        if facade is None:
            return self
        bound: Callable[P, R] = getattr(getattr(facade, self.part), self.method.__name__)
        return bound

    def __call__(self, facade: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        """``Facade.call(facade, ...)``, as for a method taken from its class."""
        bound: Callable[P, R] = self.__get__(facade)
        return bound(*args, **kwargs)


__all__ = ["Forwarded"]
