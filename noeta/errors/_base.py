"""The root of Noeta's errors, and how each travels across the workflow boundary."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar


class NoetaError(Exception):
    """Base class of all Noeta errors.

    Crossing the workflow boundary, an error travels as a Temporal ``ApplicationError`` whose
    ``type`` is the class name and whose single detail is ``to_details()``; ``from_details`` builds
    it back on the other side. An error with attributes besides its message names them in
    ``_detail_defaults`` and takes them as keywords after the message; one whose fields are of
    another shape (the dataclass errors) defines both methods itself.
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
