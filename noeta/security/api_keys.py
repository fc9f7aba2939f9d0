"""API keys of ``noeta serve`` with a name, a tenant and roles, and the identity a request acts as.

A line of the keys file (``NOETA_API_KEYS_FILE``)::

    SECRET NAME TENANT ROLE[,ROLE...]     # e.g.  9f2c...e1 alice acme read,approve
    SECRET                                # all roles, tenant "default" (as before tenants)

Every key of ``NOETA_API_KEYS`` has all roles and the tenant ``default``; its name is its id (a
hash prefix, :func:`key_id`). Roles: ``read`` (tasks, events, messages, the inbox, the audit),
``start`` (start, fork, send goals, close), ``approve`` (answer approvals), ``inject`` (context),
``admin`` (everything, cancel included). The file is read again when it changes (its size or
modification time), so keys are added and revoked without a restart (:class:`KeyFile`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from noeta.errors import ConfigurationError
from noeta.protocols.names import DEFAULT_TENANT

logger = logging.getLogger(__name__)

Role = Literal["read", "start", "approve", "inject", "admin"]
#: Every role; ``admin`` implies the others.
ROLES: tuple[Role, ...] = get_args(Role)
ALL_ROLES: frozenset[Role] = frozenset(ROLES)
MIN_SECRET_CHARS = 16
_WORD = re.compile(r"[A-Za-z0-9._@-]{1,64}")


def key_id(secret: str) -> str:
    """A key's public id: a hash prefix, safe to log, index and put in a quota table."""
    return hashlib.sha256(secret.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ApiKey:
    """One credential: its secret (or only its SHA-256, for keys kept in a database), the name
    recorded for what it does, its tenant and roles."""

    secret: str = field(default="", repr=False)
    name: str = ""
    """Recorded as the approver and in the audit (default: the key's id)."""
    tenant: str = DEFAULT_TENANT
    roles: frozenset[Role] = ALL_ROLES
    sha256: str = field(default="", repr=False)
    """The secret's SHA-256 (hex); computed from ``secret`` when that is given."""

    def __post_init__(self) -> None:
        """ConfigurationError for a short secret, an odd name or tenant, an unknown role."""
        if self.secret or not self.sha256:
            if len(self.secret) < MIN_SECRET_CHARS:
                raise ConfigurationError(
                    f"API keys must be at least {MIN_SECRET_CHARS} characters (use e.g. `openssl rand -hex 32`)"
                )
            object.__setattr__(self, "sha256", hashlib.sha256(self.secret.encode()).hexdigest())
        elif not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise ConfigurationError("an API key's sha256 must be 64 lower-case hex digits")
        if not self.name:
            object.__setattr__(self, "name", self.id)
        for what, value in (("name", self.name), ("tenant", self.tenant)):
            if not _WORD.fullmatch(value):
                raise ConfigurationError(f"an API key's {what} must be 1-64 of A-Z a-z 0-9 . _ @ -, got {value!r}")
        unknown = set(self.roles) - ALL_ROLES
        if unknown or not self.roles:
            raise ConfigurationError(f"roles must be some of {', '.join(ROLES)}, got {', '.join(sorted(self.roles))}")

    @property
    def id(self) -> str:
        """The key's id (:func:`key_id`: the first 16 hex digits of its SHA-256)."""
        return self.sha256[:16]


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: the key's name, tenant, roles and id (for quotas)."""

    name: str
    tenant: str = DEFAULT_TENANT
    roles: frozenset[Role] = ALL_ROLES
    key_id: str = "anonymous"

    def may(self, role: Role) -> bool:
        """Whether this identity has ``role`` (``admin`` has every role)."""
        return role in self.roles or "admin" in self.roles

    @classmethod
    def of(cls, key: ApiKey) -> Principal:
        """The identity a request presenting ``key`` acts as."""
        return cls(name=key.name, tenant=key.tenant, roles=key.roles, key_id=key.id)


#: Requests to a server without API keys: every role, the default tenant.
ANONYMOUS = Principal(name="anonymous")


def parse_key_line(line: str, what: str = "the keys file") -> ApiKey | None:
    """One line of a keys file (None for a blank line or a ``#`` comment)."""
    words = line.split()
    if not words or words[0].startswith("#"):
        return None
    if len(words) == 1:
        return ApiKey(words[0])
    if len(words) != 4:
        raise ConfigurationError(f"{what}: a line is `SECRET NAME TENANT ROLE[,ROLE...]` or only a secret")
    secret, name, tenant, roles = words
    wanted = {r.strip() for r in roles.split(",") if r.strip()}
    unknown = wanted - set(ROLES)
    if unknown:
        raise ConfigurationError(f"{what}: unknown role(s) {', '.join(sorted(unknown))}; roles are {', '.join(ROLES)}")
    return ApiKey(secret, name, tenant, frozenset(r for r in ROLES if r in wanted))


def parse_key_lines(text: str, what: str = "the keys file") -> tuple[ApiKey, ...]:
    """Every key of a keys file's text; ConfigurationError for a bad line or a secret given twice."""
    keys = tuple(k for k in (parse_key_line(line, what) for line in text.splitlines()) if k is not None)
    if len({k.sha256 for k in keys}) != len(keys):
        raise ConfigurationError(f"{what}: a secret appears twice")
    if len({k.name for k in keys}) != len(keys):
        raise ConfigurationError(f"{what}: a key name appears twice (names are what approvals record)")
    return keys


def read_key_file(path: Path, what: str = "the keys file") -> tuple[ApiKey, ...]:
    """The keys of the file at ``path``; ConfigurationError when it cannot be read or parsed."""
    try:
        text = path.expanduser().read_text()
    except OSError as err:
        raise ConfigurationError(f"cannot read {what} ({err.strerror})") from None
    return parse_key_lines(text, what)


class KeyFile:
    """A keys file, read again when its size or modification time changes. A change that does
    not parse keeps the keys last read (and logs why), so a typo never locks every client out;
    a file that disappears leaves no keys from it."""

    def __init__(self, path: Path, what: str = "NOETA_API_KEYS_FILE") -> None:
        """Reads ``path`` now: ConfigurationError when it cannot be read or parsed."""
        self.path, self._what = path.expanduser(), what
        self._signature = self._stat()
        self.keys = read_key_file(self.path, what)

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def current(self) -> tuple[ApiKey, ...]:
        """The file's keys, re-read if it changed since the last call."""
        signature = self._stat()
        if signature != self._signature:
            self._signature = signature
            try:
                self.keys = read_key_file(self.path, self._what) if signature is not None else ()
                logger.info("%s re-read: %d keys", self._what, len(self.keys))
            except ConfigurationError as err:
                logger.error("%s changed but was not applied, the keys read before stay: %s", self._what, err)
        return self.keys


def matching_key(presented: str, keys: Iterable[ApiKey]) -> ApiKey | None:
    """The key whose secret is ``presented``: its SHA-256 compared in constant time with every
    key's (no early exit that would leak which one matched)."""
    digest = hashlib.sha256(presented.encode()).hexdigest()
    found: ApiKey | None = None
    for key in keys:
        if hmac.compare_digest(digest, key.sha256):
            found = key
    return found
