"""The root of Noeta's errors, and how each travels across the workflow boundary."""

from __future__ import annotations

from typing import Any, ClassVar


class NoetaError(Exception):
    """Base class of all Noeta errors.

    Crossing the workflow boundary, an error travels as a Temporal ``ApplicationError`` whose
    ``type`` is the class name and whose single detail is ``to_details()``; ``from_details`` builds
    it back on the other side.
    """

    #: When True, Temporal must not retry an activity that raised this error.
    non_retryable: ClassVar[bool] = True

    def to_details(self) -> dict[str, Any]:
        """The error's fields as plain JSON data (the ApplicationError's detail)."""
        return {"message": str(self)}

    @classmethod
    def from_details(cls, message: str, details: dict[str, Any]) -> "NoetaError":
        """The error rebuilt from an ApplicationError's message and detail."""
        return cls(details.get("message", message))
