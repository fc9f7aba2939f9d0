"""A setting's rules on its own field: ``max_turns: int = setting(50, ge=1, le=10_000)``.

``setting()`` is ``dataclasses.field()`` with the allowed range kept in the field's metadata, so a
setting's type, default, range and (in the docstring under it) help are written in one place. What
reads them derives from the field: the range checks (noeta.protocols.bounds), the HTTP body's
OpenAPI schema (noeta.client.settings_body), the CLI's flags (noeta.cli.setting_flags).

The range is kept under a key of Noeta's own, never as ``ge``/``le``: pydantic reads a dataclass
field's metadata named like its ``Field()`` arguments and would then refuse an out-of-range value
while decoding a ``TaskInput`` in the workflow, which fails its workflow task forever; the workflow
checks the ranges itself and fails the task with a ConfigurationError instead.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Seconds in a day, the unit most timeouts' ranges are written in.
DAY = 86400.0

#: The key of a setting's rule in its field's metadata.
RULE_KEY = "noeta.setting"


@dataclass(frozen=True, slots=True)
class Rule:
    """The rules of one setting beyond its type and default."""

    lowest: float | None = None
    """The smallest value allowed (None: no range; the setting is not a number)."""
    highest: float | None = None
    """The largest value allowed."""
    above_lowest: bool = False
    """``lowest`` itself is not allowed (timeouts must be > 0)."""
    deprecated: bool = False
    """Still honoured, no longer offered: the CLI makes no flag for it."""
    choices: tuple[str, ...] | None = None
    """The values a text setting may take (None: any)."""


#: The rule of a field declared without one.
NO_RULE = Rule()


def setting(
    default: Any = dataclasses.MISSING,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
    deprecated: bool = False,
    choices: tuple[str, ...] | None = None,
) -> Any:
    """A dataclass field with its default and its allowed range: at least ``ge`` (or above ``gt``)
    and at most ``le`` (a numeric setting gives both ends), or the ``choices`` of a text setting."""
    if (ge is not None and gt is not None) or ((ge is None and gt is None) != (le is None)):
        raise TypeError("a range is ge= or gt=, and le=")
    lowest = gt if gt is not None else ge
    rule = Rule(lowest, le, above_lowest=gt is not None, deprecated=deprecated, choices=choices)
    given: dict[str, Any] = {"metadata": {RULE_KEY: rule}}
    if default is not dataclasses.MISSING:
        given["default"] = default
    if default_factory is not dataclasses.MISSING:
        given["default_factory"] = default_factory
    return dataclasses.field(**given)


def rule_of(item: dataclasses.Field[Any]) -> Rule:
    """The rule ``setting()`` put on a dataclass field (NO_RULE for a field declared otherwise)."""
    rule = item.metadata.get(RULE_KEY, NO_RULE)
    return rule if isinstance(rule, Rule) else NO_RULE


def unwrap_optional(hint: Any) -> tuple[Any, bool]:
    """A setting's type without None, and whether it allows None (``int | None`` -> ``(int, True)``).
    A union of several other types comes back as it is."""
    if typing.get_origin(hint) not in (typing.Union, types.UnionType):
        return hint, False
    args = typing.get_args(hint)
    rest = [arg for arg in args if arg is not type(None)]
    return (rest[0] if len(rest) == 1 else hint), len(rest) < len(args)


__all__ = ["DAY", "NO_RULE", "RULE_KEY", "Rule", "rule_of", "setting", "unwrap_optional"]
