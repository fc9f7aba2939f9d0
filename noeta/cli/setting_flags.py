"""The task settings as ``noeta run`` / ``noeta start`` flags, derived from their declaration.

Every TaskSettings field of a plain type (text, number, yes/no) that is not deprecated is a flag of
the same name (``max_turns`` is ``--max-turns``): its help is the first sentence of the field's
docstring and its default the field's, its range or choices the field's rule. A flag left out is
not passed, so Options applies the default and the CLI cannot disagree with the Python API or the
HTTP API (``tests/test_task_settings.py`` compares them). Settings of other types (``metadata``,
``limits``, the activity options...) have flags of their own in noeta.cli.parser, or none.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from noeta.client.settings_body import attribute_docs
from noeta.protocols.setting import rule_of, unwrap_optional
from noeta.protocols.task_settings import TaskSettings

#: Older spellings of a setting's flag, still accepted.
ALIASES: dict[str, tuple[str, ...]] = {"system_prompt": ("--system",)}

_PLAIN = (str, int, float, bool)


@dataclass(frozen=True, slots=True)
class SettingFlag:
    """One task setting as a command-line flag."""

    name: str
    """The TaskSettings field (and the parsed arguments' attribute)."""
    kind: type[Any]
    """str, int, float or bool."""
    default: Any
    """The field's default (None: the provider's or the worker's)."""
    help: str
    """The first sentence of the field's docstring, with the default."""
    choices: tuple[str, ...] | None = None

    @property
    def flag(self) -> str:
        """``--max-turns`` for ``max_turns``."""
        return "--" + self.name.replace("_", "-")


def setting_flags() -> list[SettingFlag]:
    """A flag for every TaskSettings field of a plain type that is not deprecated, in declaration order."""
    hints, docs = typing.get_type_hints(TaskSettings), attribute_docs(TaskSettings)
    flags = []
    for item in dataclasses.fields(TaskSettings):
        kind, rule = _plain_type(hints[item.name]), rule_of(item)
        if kind is None or rule.deprecated:
            continue
        default = None if item.default is dataclasses.MISSING else item.default
        flags.append(SettingFlag(item.name, kind, default, _help(docs.get(item.name, ""), default), rule.choices))
    return flags


def add_setting_flags(
    cmd: argparse.ArgumentParser, number: Callable[[str], Callable[[str], float]], text: Callable[[str], str]
) -> None:
    """Add a flag per setting to ``cmd``: ``number(name)`` is the type that checks a number setting's
    range, ``text`` the type of a text setting."""
    for flag in setting_flags():
        given: dict[str, Any] = {"dest": flag.name, "default": None, "help": flag.help}
        if flag.kind is bool:
            given["action"] = argparse.BooleanOptionalAction
        elif flag.kind is str:
            given.update(type=text, metavar=None if flag.choices else "TEXT", choices=flag.choices)
        else:
            given.update(type=number(flag.name), metavar="N")
        cmd.add_argument(flag.flag, *ALIASES.get(flag.name, ()), **given)


def given_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given on the command line, as Options keyword arguments."""
    values = {flag.name: getattr(args, flag.name, None) for flag in setting_flags()}
    return {name: value for name, value in values.items() if value is not None}


def _plain_type(hint: Any) -> type[Any] | None:
    """str, int, float or bool of a setting's type (None allowed beside it), else None."""
    kind, _optional = unwrap_optional(hint)
    return kind if kind in _PLAIN else None


def _help(doc: str, default: Any) -> str:
    """The first sentence of a docstring as flag help (argparse formats ``%``), with the default."""
    sentence = doc.replace("``", "").split(". ")[0].rstrip(".")
    sentence = sentence[:1].lower() + sentence[1:] if sentence[1:2].islower() else sentence
    if default is None:
        shown = ""
    elif isinstance(default, bool):
        shown = f" (default {'on' if default else 'off'})"
    else:
        shown = f" (default {default:g})" if isinstance(default, float) else f" (default {default})"
    return (sentence + shown).replace("%", "%%")


__all__ = ["ALIASES", "SettingFlag", "add_setting_flags", "given_settings", "setting_flags"]
