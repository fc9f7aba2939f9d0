"""Objects named by ``package.module:attribute`` in configuration (a worker's registry, a codec)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeGuard, TypeVar

from noeta.errors import ConfigurationError

T = TypeVar("T")


def load_object(path: str, accepts: Callable[[object], TypeGuard[T]], kind: str, what: str) -> T:
    """Import ``module:attribute`` (dots allowed in the attribute); an attribute that ``accepts``
    refuses is called without arguments (a factory) and must return one it accepts. ``kind`` and
    ``what`` name the expected type and the setting in errors.

    A predicate rather than a class: the expected type may be abstract (``PayloadCodec``), which a
    ``type[T]`` parameter does not admit."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"{what} {path!r} must look like 'package.module:name'")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as err:
        raise ConfigurationError(f"cannot load {what} {path!r}: {err}") from err
    made = target() if callable(target) and not accepts(target) else target
    if not accepts(made):
        raise ConfigurationError(f"{what} {path!r} gave {type(made).__name__}, not a {kind}")
    return made
