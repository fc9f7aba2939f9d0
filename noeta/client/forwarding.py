"""A facade's public call that something else serves: composition without restating a signature.

``AsyncClient`` and ``Client`` are facades over small parts (task operations, starts, schedules,
...). Writing ``async def create_schedule(self, schedule_id, goal, ..., identity=None)`` on the facade
only to call the part with the same arguments would state each signature twice; inheriting the parts
as mixins would split one class across files. ``start = Forwarded("_starts", StartCalls.start)``
instead names the part and its method once: the facade's attribute is that part's bound method, so
callers, mypy and ``help()`` see the part's own signature and docstring. The synchronous client's
blocking calls are the same kind of attribute (:class:`~noeta.client.blocking.Blocking`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")


class FacadeCall(Generic[P, R]):
    """A method of a facade, taking ``P`` and returning ``R``, that ``bind`` makes for each facade."""

    def __init__(self, method: Callable[..., Any]) -> None:
        """``method``: the function that serves the call, whose name, docstring and signature it takes."""
        self.method = method
        self.__name__: str = method.__name__
        self.__doc__ = method.__doc__
        self.__wrapped__ = method  # inspect.signature and help() show the method's signature

    def bind(self, facade: Any) -> Callable[P, R]:
        """The call on ``facade``."""
        raise NotImplementedError

    @overload
    def __get__(self, facade: None, owner: type[Any]) -> FacadeCall[P, R]: ...

    @overload
    def __get__(self, facade: object, owner: type[Any] | None = None) -> Callable[P, R]: ...

    def __get__(self, facade: object | None, owner: type[Any] | None = None) -> FacadeCall[P, R] | Callable[P, R]:
        """On the class: this descriptor (called with a facade, as a method is); on a facade: the call."""
        if facade is None:
            return self
        return self.bind(facade)

    def __call__(self, facade: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        """``Facade.call(facade, ...)``, as for a method taken from its class."""
        return self.bind(facade)(*args, **kwargs)


class Forwarded(FacadeCall[P, R]):
    """The method ``method`` of the facade's part in attribute ``part``, as the facade's own."""

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]) -> None:
        """``part``: the facade's attribute holding the part; ``method``: the part's class's method."""
        super().__init__(method)
        self.part = part

    def bind(self, facade: Any) -> Callable[P, R]:
        """The part's bound method: nothing is bound early, so a replaced part is seen at once."""
        bound: Callable[P, R] = getattr(getattr(facade, self.part), self.__name__)
        return bound


__all__ = ["FacadeCall", "Forwarded"]
