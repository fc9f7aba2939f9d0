"""What every Noeta settings model shares: variables read as plain text, empty meaning unset, and a
ConfigurationError that names the variable of a bad value.

A concern's settings are one :class:`EnvSettings` subclass, declared where that concern lives (the
encryption keys in ``noeta.security``, the worker tuning here, the client's in ``noeta.client``):
each variable's name and default are written once, on its field. A field's variable is the class's
``env_prefix`` and the field's name in capitals, unless its ``validation_alias`` names another.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any, Self

from pydantic import ValidationError, ValidatorFunctionWrapHandler, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.sources.utils import parse_env_vars

from noeta.config.context_values import set_within
from noeta.errors import ConfigurationError

#: The environment settings are read from; unset: the process's (``EnvSettings.from_env`` sets it).
_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("noeta_settings_environ", default=None)


def reading(environ: Mapping[str, str] | None) -> AbstractContextManager[None]:
    """Settings built inside read ``environ`` instead of the process's environment (None: the
    process's)."""
    return set_within(_ENVIRON, environ)


def current_environ() -> Mapping[str, str]:
    """The environment settings are read from now (see :func:`reading`)."""
    environ = _ENVIRON.get()
    return os.environ if environ is None else environ


class PlainEnvSource(EnvSettingsSource):
    """Variables as plain text: a list or mapping field gets the text itself (its validator splits
    it, usually at commas), never JSON; read from :func:`current_environ`."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(current_environ(), self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        """The text itself; the field's validator parses it."""
        return value


def csv(raw: Any) -> Any:
    """A comma-separated text as a tuple of its non-empty, stripped items (other values as given)."""
    if not isinstance(raw, str):
        return raw
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def blank_as_none(raw: Any) -> Any:
    """Text that is only spaces counts as unset, like empty text."""
    if isinstance(raw, str) and not raw.strip():
        return None
    return raw.strip() if isinstance(raw, str) else raw


class EnvSettings(BaseSettings):
    """Settings from keyword arguments, else their variables (empty counts as unset), else their
    defaults; frozen. A bad value raises ConfigurationError naming its variable."""

    model_config = SettingsConfigDict(
        env_prefix="NOETA_", env_ignore_empty=True, frozen=True, populate_by_name=True,
        use_attribute_docstrings=True, extra="ignore",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **values: Any) -> Self:
        """The settings with the variables of ``environ`` (None: the process's environment) under
        the keyword arguments ``values``."""
        with reading(environ):
            return cls(**values)

    @classmethod
    def variable(cls, field_name: str) -> str:
        """The environment variable of the field ``field_name``."""
        alias = cls.model_fields[field_name].validation_alias if field_name in cls.model_fields else None
        if isinstance(alias, str):
            return alias
        return f"{cls.model_config.get('env_prefix', '')}{field_name}".upper()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keyword arguments, then :meth:`variable_sources` (no dotenv or secret files: the variables
        are the interface)."""
        return init_settings, *cls.variable_sources()

    @classmethod
    def variable_sources(cls) -> tuple[PydanticBaseSettingsSource, ...]:
        """Where values not given as keyword arguments come from, first source first: the
        variables."""
        return (PlainEnvSource(cls),)

    @model_validator(mode="wrap")
    @classmethod
    def _configuration_error(cls, values: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # Every bad setting is a ConfigurationError, as everywhere else in Noeta; validators that
        # raise one themselves already name the variable.
        try:
            return handler(values)
        except ValidationError as err:
            raise ConfigurationError("; ".join(_problem(cls, e) for e in err.errors())) from None


def _problem(cls: type[EnvSettings], error: Any) -> str:
    loc = [str(part) for part in error["loc"]]
    if not loc:
        return str(error["msg"])
    field = next((name for name, f in cls.model_fields.items() if loc[0] in (name, f.validation_alias)), loc[0])
    where = ".".join([field, *loc[1:]])
    return f"{where} ({cls.variable(field)}): {error['msg']}"


__all__ = ["EnvSettings", "PlainEnvSource", "blank_as_none", "csv", "current_environ", "reading"]
