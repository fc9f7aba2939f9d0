"""A facade's public call that something else serves: composition without restating a signature.

``AsyncClient`` and ``Client`` are facades over small parts (task operations, starts, schedules,
...). Writing ``async def create_schedule(self, schedule_id, goal, ..., identity=None)`` on the facade
only to call the part with the same arguments would state each signature twice; inheriting the parts
as mixins would split one class across files. ``start = Forwarded("_starts", StartCalls.start)``
instead names the part and its method once: the facade's attribute is that part's bound method, so
callers, mypy and ``help()`` see the part's own signature and docstring. The synchronous client's
blocking calls are the same kind of attribute (:class:`~noeta.client.blocking.Blocking`). A
setting a part holds is the facade's attribute in the same way:
``task_queue = Shared[str]("_tasks", "task_queue", "The queue ...")`` reads and sets the part's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, overload

from typing_extensions import TypeVar  # a type variable's default (PEP 696)

P = ParamSpec("P")
R = TypeVar("R")
G = TypeVar("G")
S = TypeVar("S", default=G)


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


class Shared(Generic[G, S]):
    """An attribute of the facade that its part holds: read, it is the part's (typed ``G``); set
    (to an ``S``, by default a ``G``), it sets the part's, which converts what it is given."""

    def __init__(self, part: str, name: str, doc: str) -> None:
        """``part``: the facade's attribute holding the part; ``name``: the part's attribute;
        ``doc``: what the attribute is, for ``help()`` and the reference docs."""
        self.part = part
        self.name = name
        self.__doc__ = doc

    @overload
    def __get__(self, facade: None, owner: type[Any]) -> Shared[G, S]: ...

    @overload
    def __get__(self, facade: object, owner: type[Any] | None = None) -> G: ...

    def __get__(self, facade: object | None, owner: type[Any] | None = None) -> Shared[G, S] | G:
        """On the class: this descriptor; on a facade: the part's value, read now."""
        if facade is None:
            return self
        value: G = getattr(getattr(facade, self.part), self.name)
        return value

    def __set__(self, facade: object, value: S) -> None:
        """Set the part's attribute (the part converts, e.g. a sequence into its list)."""
        setattr(getattr(facade, self.part), self.name, value)


__all__ = ["FacadeCall", "Forwarded", "Shared"]
