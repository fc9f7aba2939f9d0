"""The task settings as a JSON request body, derived from their one declaration (TaskSettings).

``settings_body()`` builds a pydantic model with one optional field per TaskSettings field: the same
name, a strict JSON type (a float setting takes any JSON number), the field's docstring as its
description, its default, its range as the schema's ``minimum`` and ``maximum`` (noeta.protocols.setting),
and ``null`` or absent meaning the default. Nested settings (ActivityOptions, UsageLimits) become
nested bodies of their own. The range is shown, not enforced here: ``Options`` checks it, so the
API refuses a value with the message the Python API and the CLI give. ``to_settings()`` gives the values as ``Options``
keyword arguments, so a request model adds only what is not a TaskSettings field::

    class TaskOptions(TaskSettingsBody):
        provider: StrictStr | None = None
        ...

        def to_options(self) -> Options:
            return Options(**self.to_settings(), **self.model_dump(exclude_none=True, exclude=set(self.settings_fields())))

A setting added to TaskSettings then reaches the HTTP API and its OpenAPI description by itself.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
import typing
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, create_model

from noeta.protocols.setting import Rule, rule_of, unwrap_optional
from noeta.protocols.task_settings import TaskSettings


class SettingsBody(BaseModel):
    """Base of the derived bodies: strict JSON types, unknown fields refused."""

    model_config = ConfigDict(extra="forbid", strict=True)
    settings_class: ClassVar[type[Any]] = TaskSettings

    @classmethod
    def settings_fields(cls) -> list[str]:
        """The fields of this body that are settings (a subclass may add others)."""
        return [f.name for f in dataclasses.fields(cls.settings_class)]

    def to_settings(self) -> dict[str, Any]:
        """The settings given (present and not null) as keyword arguments of ``settings_class`` (or
        Options); the others keep the defaults ``settings_class`` declares."""
        given: dict[str, Any] = {}
        for name in self.settings_fields():
            value = getattr(self, name)
            if isinstance(value, SettingsBody):
                value = value.settings_class(**value.to_settings())
            if name in self.model_fields_set and value is not None:
                given[name] = value
        return given


@functools.cache
def settings_body(settings: type[Any] = TaskSettings) -> type[SettingsBody]:
    """The request body of the dataclass ``settings`` (default: TaskSettings); see the module."""
    hints = typing.get_type_hints(settings)
    docs = attribute_docs(settings)
    fields: dict[str, Any] = {}
    for item in dataclasses.fields(settings):
        json_type = _json_type(hints[item.name])
        fields[item.name] = (json_type | None, _body_field(item, json_type, docs.get(item.name)))
    body: type[SettingsBody] = create_model(
        f"{settings.__name__}Body", __base__=SettingsBody, __doc__=_first_line(settings), **fields
    )
    body.settings_class = settings
    return body


def _body_field(item: dataclasses.Field[Any], json_type: Any, description: str | None) -> Any:
    """The body's Field of the setting ``item``: its default (or default factory) and its rule in
    the JSON schema."""
    shown = _shown_rule(rule_of(item)) or None
    if item.default_factory is not dataclasses.MISSING and item.default_factory() is not None:
        nested = isinstance(json_type, type) and issubclass(json_type, SettingsBody)
        factory = json_type if nested else item.default_factory
        return Field(default_factory=factory, description=description, json_schema_extra=shown)
    default = None if item.default is dataclasses.MISSING else item.default
    return Field(default=default, description=description, json_schema_extra=shown)


def _shown_rule(rule: Rule) -> dict[str, Any]:
    """A setting's rule as JSON Schema keywords (the range, the choices, deprecation)."""
    shown: dict[str, Any] = {}
    if rule.lowest is not None:
        shown["exclusiveMinimum" if rule.above_lowest else "minimum"] = rule.lowest
    if rule.highest is not None:
        shown["maximum"] = rule.highest
    if rule.deprecated:
        shown["deprecated"] = True
    if rule.choices is not None:
        shown["enum"] = [*rule.choices, None]
    return shown


def _json_type(hint: Any) -> Any:
    """The strict request type of a setting's type (None left out: every body field is optional)."""
    hint, _optional = unwrap_optional(hint)
    if hint is bool:
        return StrictBool
    if hint is int:
        return StrictInt
    if hint is float:
        return StrictInt | StrictFloat
    if hint is str:
        return StrictStr
    if typing.get_origin(hint) is dict:
        return hint
    if typing.get_origin(hint) is typing.Literal:  # a choice among strings (Compaction.strategy)
        return hint
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return settings_body(hint)
    raise TypeError(f"no JSON request type for a setting of type {hint!r}: add one to _json_type")


def attribute_docs(cls: type[Any]) -> dict[str, str]:
    """The docstrings written under the fields of class ``cls`` (empty when its source is not available)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    docs: dict[str, str] = {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for field_node, next_node in zip(body, body[1:], strict=False):  # each statement with the next
        if (
            isinstance(field_node, ast.AnnAssign)
            and isinstance(field_node.target, ast.Name)
            and isinstance(next_node, ast.Expr)
            and isinstance(next_node.value, ast.Constant)
            and isinstance(next_node.value.value, str)
        ):
            docs[field_node.target.id] = " ".join(next_node.value.value.split())
    return docs


def _first_line(cls: type[Any]) -> str:
    return " ".join((cls.__doc__ or "").split())


# The TaskSettings body, for a request model to subclass. Type checkers see SettingsBody: the
# settings' fields are made when this module is imported (read them through ``to_settings()``).
if TYPE_CHECKING:
    TaskSettingsBody = SettingsBody
else:
    TaskSettingsBody = settings_body()


__all__ = ["SettingsBody", "TaskSettingsBody", "attribute_docs", "settings_body"]
