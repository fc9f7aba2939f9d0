"""The root of Noeta's errors, and how each travels across the workflow boundary."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar


class NoetaError(Exception):
    """Base class of all Noeta errors.

    Crossing the workflow boundary, an error travels as a Temporal ``ApplicationError`` whose
    ``type`` is the class name and whose single detail is ``to_details()``; ``from_details`` builds
    it back on the other side. An error with attributes besides its message names them in
    ``_detail_defaults`` and takes them as keywords after the message; an error declared as a
    dataclass derives from :class:`FieldsError` instead.
    """

    #: When True, Temporal must not retry an activity that raised this error.
    non_retryable: ClassVar[bool] = True

    #: The attributes that travel in the details besides the message, each with the value it is
    #: rebuilt with when the details lack it.
    _detail_defaults: ClassVar[Mapping[str, Any]] = {}

    def to_details(self) -> dict[str, Any]:
        """The error's fields as plain JSON data (the ApplicationError's detail)."""
        return {"message": str(self), **{name: getattr(self, name) for name in self._detail_defaults}}

    @classmethod
    def from_details(cls, message: str, details: dict[str, Any]) -> "NoetaError":
        """The error rebuilt from an ApplicationError's message and detail."""
        attributes = {name: details.get(name, default) for name, default in cls._detail_defaults.items()}
        return cls(details.get("message", message), **attributes)


@dataclasses.dataclass(eq=False, init=False)  # a dataclass to type checkers; Exception's __init__ stays
class FieldsError(NoetaError):
    """A Noeta error declared as a dataclass: its details are its fields. Rebuilt, a field the
    details lack takes its ``_detail_defaults`` value, else its declared default (a ``message``
    field: the ApplicationError's message)."""

    def to_details(self) -> dict[str, Any]:
        """Every field, copied (the details never share a list with the error)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_details(cls, message: str, details: dict[str, Any]) -> "NoetaError":
        """The error rebuilt from an ApplicationError's message and detail."""
        names = {f.name for f in dataclasses.fields(cls)}
        fallback = {"message": message} if "message" in names else {}
        build: Callable[..., NoetaError] = cls
        return build(**{**fallback, **cls._detail_defaults, **{k: v for k, v in details.items() if k in names}})
