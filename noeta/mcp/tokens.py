"""Where workers keep the OAuth tokens of remote MCP servers: one record per server URL, grant and
client, in a directory every worker of the fleet reads (a shared volume), encrypted with the
payload codec's keys (``NOETA_ENCRYPTION_KEYS``) when the worker has them.

========================  ====================================================================
variable                  meaning
========================  ====================================================================
``NOETA_MCP_TOKENS_DIR``  the directory (default ``~/.noeta/mcp-tokens``); files are 0600
========================  ====================================================================

A record holds the tokens, when the access token expires, the client's registration and the
authorization server's metadata (so another worker can refresh without discovering it again).
Tokens never travel in task input, history, events or logs; the worker registers them with the
scrubber as soon as it reads or gets them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from noeta.context.atomic_files import write_new
from noeta.errors import EncryptionKeyError
from noeta.security.keys import KeyRing, keyring_from_env
from noeta.security.scrub import register_secret

TOKENS_DIR_ENV = "NOETA_MCP_TOKENS_DIR"
_FORMAT = "noeta-mcp-tokens/1"


def login_key(url: str, grant: str, client_id: str | None) -> str:
    """The record's name for a server URL, grant and client (None: a dynamically registered one)."""
    return hashlib.sha256(f"{url}\n{grant}\n{client_id or ''}".encode()).hexdigest()


def register_record_secrets(record: dict[str, Any]) -> None:
    """Have the scrubber redact the tokens and client secret of ``record`` wherever they show up."""
    tokens = record.get("tokens") or {}
    client = record.get("client_info") or {}
    for value in (tokens.get("access_token"), tokens.get("refresh_token"), client.get("client_secret")):
        register_secret(value)


class McpTokenStore:
    """Token records in ``directory``, sealed with ``keys`` when given (AES-GCM, the record's name
    as associated data, so a file copied under another name does not open)."""

    def __init__(self, directory: str | os.PathLike[str], keys: KeyRing | None = None) -> None:
        """``directory`` is created (0700) on the first save."""
        self.directory = Path(directory).expanduser()
        self.keys = keys

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "McpTokenStore":
        """The store ``NOETA_MCP_TOKENS_DIR`` names, sealed with ``NOETA_ENCRYPTION_KEYS`` if set."""
        env = dict(os.environ if environ is None else environ)
        directory = env.get(TOKENS_DIR_ENV, "").strip() or "~/.noeta/mcp-tokens"
        return cls(directory, keyring_from_env(env))

    def __repr__(self) -> str:
        """The directory and whether records are sealed, never their content."""
        return f"McpTokenStore({str(self.directory)!r}, sealed={self.keys is not None})"

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def load(self, key: str) -> dict[str, Any] | None:
        """The record ``key``, or None; EncryptionKeyError for a sealed record this worker cannot open."""
        try:
            stored = json.loads(self._path(key).read_bytes())
        except FileNotFoundError:
            return None
        if stored.get("format") != _FORMAT:
            raise EncryptionKeyError(f"{self._path(key)} is not an MCP token record")
        if "sealed" in stored:
            if self.keys is None:
                raise EncryptionKeyError(
                    f"the MCP token record {self._path(key)} is encrypted; give this worker the keys "
                    "(NOETA_ENCRYPTION_KEYS) that sealed it"
                )
            plain = self.keys.decrypt(stored["key_id"], base64.b64decode(stored["sealed"]), key.encode())
            record: dict[str, Any] = json.loads(plain)
        else:
            record = stored["record"]
        register_record_secrets(record)
        return record

    def save(self, key: str, record: dict[str, Any]) -> None:
        """Write the record ``key`` atomically (a reader sees the old or the new one, never half)."""
        register_record_secrets(record)
        data: dict[str, Any] = {"format": _FORMAT}
        if self.keys is not None:
            key_id, sealed = self.keys.encrypt(json.dumps(record, sort_keys=True).encode(), key.encode())
            data.update(key_id=key_id, sealed=base64.b64encode(sealed).decode())
        else:
            data["record"] = record
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_new(str(self._path(key)), json.dumps(data, sort_keys=True).encode(), durable=True)

    def delete(self, key: str) -> bool:
        """Forget the record ``key``; whether there was one."""
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            return False
        return True
