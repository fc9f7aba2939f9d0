"""``expect_validator``: checks on a task's final answer, beyond its schema.

A validator gets the validated data (a pydantic model instance, a dict, or the answer text when the
task has no ``output_schema``) and returns ``True`` (pass), a ``str`` (fail: the message is added to
the prompt and the model tries again) or ``False`` (fail with "Validation failed"). It may be sync or
async, and may do I/O: validators run on the worker inside a recorded activity, so replay never
re-runs them. An exception raised by a validator is not the model's fault: the activity is retried
and, if it keeps failing, the task fails with that error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, TypeVar, Union, overload

from noeta.errors import ConfigurationError

ValidatorResult = Union[bool, str]
ValidatorFunction = Callable[[Any], Union[ValidatorResult, Awaitable[ValidatorResult]]]

DEFAULT_FAILURE_MESSAGE = "Validation failed"

D = TypeVar("D")


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """The structured output a task must produce."""

    json_schema: dict[str, Any]
    model: str | None = None
    """``module:QualName`` of a pydantic model; workers that have it validate with it."""


@dataclass(frozen=True, slots=True)
class Validator:
    """A check of a task's final answer, found on workers by ``name``; ``fn`` gets the parsed
    answer."""
    fn: ValidatorFunction = field(repr=False)
    name: str
    """Registry key: workers find the validator by this name."""
    schema: Any = None
    """Only types ``data`` for the reader; never used at run time."""


def validator_name(fn: Callable[..., Any]) -> str:
    """The default name of a validator function: ``module:QualName``."""
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


@overload
def expect_validator(fn: ValidatorFunction, /, *, name: str | None = None) -> Validator: ...


@overload
def expect_validator(
    schema: type[D], fn: Callable[[D], ValidatorResult | Awaitable[ValidatorResult]], /, *, name: str | None = None
) -> Validator: ...


@overload
def expect_validator(schema: Mapping[str, Any], fn: ValidatorFunction, /, *, name: str | None = None) -> Validator: ...


def expect_validator(*args: Any, name: str | None = None) -> Validator:
    """``expect_validator(validator)`` or ``expect_validator(schema, validator)``. The schema (a
    model class or a JSON Schema dict) only types the validator's ``data`` for a type checker."""
    if len(args) == 1:
        schema, fn = None, args[0]
    elif len(args) == 2:
        schema, fn = args
    else:
        raise TypeError("expect_validator(validator) or expect_validator(schema, validator)")
    if not callable(fn):
        raise ConfigurationError(f"expect_validator: {fn!r} is not callable")
    return Validator(fn=fn, name=name or validator_name(fn), schema=schema)


def as_validator(item: Validator | ValidatorFunction) -> Validator:
    """``item`` as a Validator (a bare function gets its default name)."""
    return item if isinstance(item, Validator) else expect_validator(item)
