"""Objects named by ``package.module:attribute`` in configuration (a worker's registry, a codec)."""

from __future__ import annotations

import importlib
from typing import Any, TypeVar

from noeta.errors import ConfigurationError

T = TypeVar("T")


def load_object(path: str, kind: type[T], what: str) -> T:
    """Import ``module:attribute`` (dots allowed in the attribute); an attribute that is not a
    ``kind`` is called without arguments (a factory) and must return one. ``what`` names the
    setting in errors."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"{what} {path!r} must look like 'package.module:name'")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as err:
        raise ConfigurationError(f"cannot load {what} {path!r}: {err}") from err
    made = target() if callable(target) and not isinstance(target, kind) else target
    if not isinstance(made, kind):
        raise ConfigurationError(f"{what} {path!r} gave {type(made).__name__}, not a {kind.__name__}")
    return made
