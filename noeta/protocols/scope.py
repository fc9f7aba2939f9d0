"""Scopes: data a task and its parents equip for everything below them (seed: ``equipScope`` /
``expectScope``).

A scope is plain JSON data recorded in the task's input, one :class:`ScopeLevel` per task on the
chain from the root to this task. Readers see the levels merged key by key, the nearest level
winning (a parent's ``lang`` shadows the grandparent's, keys it does not set show through), and
validate it with a pydantic model: schema defaults fill gaps, a missing or invalid key raises
:class:`~noeta.errors.ScopeError` naming it, and the value returned is deep-frozen.

Pure: the workflow, policies and activities all use it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ConfigDict, ValidationError

from noeta.errors import ConfigurationError, ScopeError

#: A task's own scope (JSON); the merged chain travels in every child's input.
MAX_SCOPE_BYTES = 16 * 1024

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ScopeLevel:
    """The scope one task equipped (``task_id`` is the task that equipped it)."""

    task_id: str
    values: dict[str, Any] = field(default_factory=dict)


def check_scope(values: Mapping[str, Any], where: str = "scope") -> dict[str, Any]:
    """``values`` as a JSON object of bounded size, or ConfigurationError (before anything starts)."""
    if not isinstance(values, Mapping):
        raise ConfigurationError(f"{where} must be a mapping of names to JSON values, got {values!r}")
    try:
        text = json.dumps(dict(values), ensure_ascii=False)
    except (TypeError, ValueError) as err:
        raise ConfigurationError(f"{where} must hold JSON values only (it is recorded in history): {err}") from err
    if len(text.encode()) > MAX_SCOPE_BYTES:
        raise ConfigurationError(
            f"{where} is over {MAX_SCOPE_BYTES} bytes as JSON; scopes carry ids and settings, pass "
            "documents through a resource or a tool"
        )
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def equip_scope(values: Mapping[str, Any]) -> dict[str, Any]:
    """Scope data for ``Options(scope=...)`` or ``SpawnSubtask(scope=...)``: checked to be JSON."""
    return check_scope(values)


def merge_scopes(levels: Sequence[ScopeLevel]) -> dict[str, Any]:
    """The levels merged key by key, oldest first: the nearest level wins."""
    merged: dict[str, Any] = {}
    for level in levels:
        merged.update(level.values)
    return merged


def deep_freeze(value: Any) -> Any:
    """A read-only copy: models become frozen instances of a frozen subclass, lists tuples, dicts
    read-only mappings, sets frozensets (seed: ``Object.freeze`` applied recursively)."""
    if isinstance(value, BaseModel):
        cls = frozen_model(type(value))
        fields = {name: deep_freeze(getattr(value, name)) for name in type(value).model_fields}
        return cls.model_construct(_fields_set=set(value.model_fields_set), **fields)
    if isinstance(value, (list, tuple)):
        return tuple(deep_freeze(v) for v in value)
    if isinstance(value, Mapping):
        return MappingProxyType({k: deep_freeze(v) for k, v in value.items()})
    if isinstance(value, (set, frozenset)):
        return frozenset(deep_freeze(v) for v in value)
    return value


_FROZEN: dict[type, type] = {}


def frozen_model(cls: type[M]) -> type[M]:
    """A subclass of ``cls`` whose instances refuse assignment (cached per class)."""
    if cls.model_config.get("frozen"):
        return cls
    frozen = _FROZEN.get(cls)
    if frozen is None:
        config = ConfigDict(**{**cls.model_config, "frozen": True})
        frozen = type(cls.__name__, (cls,), {"model_config": config, "__module__": cls.__module__,
                                             "__qualname__": cls.__qualname__})
        _FROZEN[cls] = frozen
    return frozen


def scope_problems(err: ValidationError) -> tuple[str, list[str]]:
    """(message, keys) naming every missing or invalid key of a failed validation."""
    keys, parts = [], []
    for item in err.errors():
        key = ".".join(str(p) for p in item["loc"]) or "(scope)"
        keys.append(key)
        if item["type"] == "missing":
            parts.append(f"scope key {key!r} is missing")
        else:
            parts.append(f"scope key {key!r} is invalid: {item['msg']}")
    return "; ".join(parts), keys


@overload
def validate_scope(schema: type[M], values: Mapping[str, Any]) -> M: ...
@overload
def validate_scope(schema: None, values: Mapping[str, Any]) -> Mapping[str, Any]: ...
def validate_scope(schema: type[BaseModel] | None, values: Mapping[str, Any]) -> Any:
    """The merged scope validated by ``schema`` (defaults applied) and deep-frozen; without a
    schema, the whole scope read-only. Raises ScopeError naming the offending keys."""
    if schema is None:
        return deep_freeze(dict(values))
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise ConfigurationError(f"expect_scope takes a pydantic model class, got {schema!r}")
    try:
        instance = schema.model_validate(dict(values))
    except ValidationError as err:
        message, keys = scope_problems(err)
        raise ScopeError(f"{message} (schema {schema.__qualname__})", keys) from None
    return deep_freeze(instance)


__all__ = [
    "MAX_SCOPE_BYTES", "ScopeLevel", "check_scope", "deep_freeze", "equip_scope", "merge_scopes",
    "validate_scope",
]
