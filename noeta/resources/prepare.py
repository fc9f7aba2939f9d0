"""The checks ``prepare_task`` makes before a task's first model call: every resource its tools
declare can be provided, and its scope satisfies the schema it declares."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema
from pydantic import BaseModel

from noeta.errors import ResourceNotFoundError, ScopeError
from noeta.protocols.resources import EquippedResource, ResourceSpec
from noeta.protocols.scope import validate_scope
from noeta.protocols.task import OutputSchema, PrepareInput
from noeta.protocols.tool import ToolSpec


def owned_resources(
    entries: Mapping[str, Any], inp: PrepareInput, tools: Mapping[str, ToolSpec]
) -> list[EquippedResource]:
    """The task-scoped resources the task owns: those its Options name and those its tools need,
    with what they depend on. Raises ResourceNotFoundError naming the first one nobody provides."""
    owned: dict[str, EquippedResource] = {}

    def need(key: str, who: str) -> None:
        if key in owned:
            return
        entry = entries.get(key)
        if isinstance(entry, ResourceSpec) and entry.lifetime == "task" and (
            key not in inp.inherited_resources or key in inp.resources
        ):
            owned[key] = EquippedResource(key, entry.expose)
            for dep in entry.deps:
                need(dep, f"resource {key!r}")
            return
        if key in inp.inherited_resources or key in entries:
            return
        raise ResourceNotFoundError(
            f"{who} needs resource {key!r}, which neither the task, a parent that exposes it, nor "
            "this worker provides; provide it with Options(resources=[equip_resource(...)]), "
            "run_with(resources=...) / query(resources=...) or the worker's Registry(resources=...)",
            key,
        )

    for key in inp.resources:
        need(key, "the task's Options.resources")
    for spec in tools.values():
        for key in spec.resources:
            need(key, f"tool {spec.name!r}")
    return list(owned.values())


def check_scope_schema(
    schema: OutputSchema | None, scope: Mapping[str, Any], models: Mapping[str, type[BaseModel]]
) -> None:
    """Raise ScopeError when the scope does not satisfy the task's declared scope schema: with the
    pydantic model when this worker has it, else with its JSON Schema."""
    if schema is None:
        return
    model = models.get(schema.model or "")
    if model is not None:
        validate_scope(model, scope)
        return
    validator = jsonschema.validators.validator_for(schema.json_schema)(schema.json_schema)
    errors = sorted(validator.iter_errors(dict(scope)), key=lambda e: list(e.absolute_path))
    if not errors:
        return
    keys, parts = [], []
    for error in errors:
        path = ".".join(str(p) for p in error.absolute_path)
        required, instance = error.validator_value, error.instance
        if error.validator == "required" and isinstance(required, list):
            missing = [k for k in required if not isinstance(instance, Mapping) or k not in instance]
            for name in missing:
                key = f"{path}.{name}" if path else name
                keys.append(key)
                parts.append(f"scope key {key!r} is missing")
        else:
            keys.append(path or "(scope)")
            parts.append(f"scope key {path or '(scope)'!r} is invalid: {error.message}")
    raise ScopeError("; ".join(parts), keys)
