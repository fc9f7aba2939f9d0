"""Worker Deployment Versioning, on by configuration: which deployment and build a worker is.

==================================  ========  ===================================================
variable (``noeta worker`` flag)    default   meaning
==================================  ========  ===================================================
``NOETA_DEPLOYMENT``                unset     the Worker Deployment this worker belongs to (one
(``--deployment``)                            per application: all its builds share it)
``NOETA_BUILD_ID``                  unset     this worker's build (its code and agents); set with
(``--build-id``)                              NOETA_DEPLOYMENT, or neither
``NOETA_UPGRADE_CHECK_SECONDS``     60        how often a versioned task idle between goals
(``--upgrade-check-seconds``)                 wakes to see whether another version became current
==================================  ========  ===================================================

Without a deployment the worker is unversioned and every task runs as before. With one, the worker
registers as version ``NAME:BUILD`` and its tasks are pinned to it (docs/operations.md, "Versions").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator, model_validator

from noeta.config.settings import EnvSettings, blank_as_none
from noeta.errors import ConfigurationError

if TYPE_CHECKING:
    from temporalio.worker import WorkerDeploymentConfig

#: Bounds of NOETA_UPGRADE_CHECK_SECONDS: each check is a timer (three history events) of an idle task.
UPGRADE_CHECK_RANGE = (1.0, 86_400.0)


class DeploymentSettings(EnvSettings):
    """The worker's deployment version (both names, or neither) and its idle tasks' upgrade check."""

    deployment: str | None = Field(default=None, validation_alias="NOETA_DEPLOYMENT")
    """The Worker Deployment's name."""
    build_id: str | None = Field(default=None, validation_alias="NOETA_BUILD_ID")
    """This worker's build id within the deployment."""
    upgrade_check_seconds: float = Field(default=60.0, validation_alias="NOETA_UPGRADE_CHECK_SECONDS")
    """Seconds between an idle versioned task's looks at whether its target version changed."""

    @field_validator("deployment", "build_id", mode="before")
    @classmethod
    def _blank(cls, raw: Any) -> Any:
        return blank_as_none(raw)

    @field_validator("deployment", "build_id")
    @classmethod
    def _no_separator(cls, value: str | None) -> str | None:
        # Temporal spells a version "deployment:build" in its search attributes; a ':' would be ambiguous.
        if value is not None and (":" in value or "/" in value or len(value) > 200):
            raise ConfigurationError(f"a deployment or build id has no ':' or '/' and at most 200 characters, got {value!r}")
        return value

    @field_validator("upgrade_check_seconds")
    @classmethod
    def _in_range(cls, value: float) -> float:
        low, high = UPGRADE_CHECK_RANGE
        if not low <= value <= high:
            raise ConfigurationError(f"NOETA_UPGRADE_CHECK_SECONDS must be from {low:g} to {high:g}, got {value!r}")
        return value

    @model_validator(mode="after")
    def _both_or_neither(self) -> DeploymentSettings:
        if (self.deployment is None) != (self.build_id is None):
            raise ConfigurationError(
                "NOETA_DEPLOYMENT (--deployment) and NOETA_BUILD_ID (--build-id) go together: set both, or neither"
            )
        return self

    @property
    def versioned(self) -> bool:
        """Whether the worker uses Worker Deployment Versioning."""
        return self.deployment is not None and self.build_id is not None

    @property
    def version(self) -> str | None:
        """The version as Temporal's search attribute spells it (``deployment:build``), or None."""
        return f"{self.deployment}:{self.build_id}" if self.versioned else None

    def worker_config(self) -> WorkerDeploymentConfig | None:
        """The ``Worker(deployment_config=...)`` of this version: every workflow it runs is pinned
        to it unless its type says otherwise; None when unversioned."""
        if self.deployment is None or self.build_id is None:
            return None
        from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
        from temporalio.worker import WorkerDeploymentConfig

        return WorkerDeploymentConfig(
            version=WorkerDeploymentVersion(deployment_name=self.deployment, build_id=self.build_id),
            use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.PINNED,
        )


__all__ = ["UPGRADE_CHECK_RANGE", "DeploymentSettings"]
