"""Encryption keys: one active key that encrypts, older keys that still decrypt (rotation).

=================================  ==========================================================
variable                           meaning
=================================  ==========================================================
``NOETA_ENCRYPTION_KEYS``          ``id:base64key[,id:base64key...]``; the first one encrypts
``NOETA_ENCRYPTION_KEYS_FILE``     a file with one ``id:base64key`` per line, first = active
                                   (``#`` comments); for mounted secrets; read each time the
                                   keys are loaded
``NOETA_CODEC``                    ``package.module:factory`` of your own payload codec
                                   (:mod:`noeta.security.codec`)
=================================  ==========================================================

Keys are 16, 24 or 32 random bytes (AES-128/192/256), standard or URL-safe base64. A new key:
``python -m noeta.security.keys``. Rotation: put the new key first and keep the old ones after it
until no open task or stored body needs them.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from pydantic import Field, field_validator, model_validator

from noeta.config.settings import EnvSettings
from noeta.errors import EncryptionKeyError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEYS_ENV = "NOETA_ENCRYPTION_KEYS"
KEYS_FILE_ENV = "NOETA_ENCRYPTION_KEYS_FILE"
CODEC_ENV = "NOETA_CODEC"
NONCE_BYTES = 12
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


@dataclass(frozen=True)
class KeyRing:
    """AES-GCM keys by id; ``active_id`` names the one that encrypts."""

    active_id: str
    keys: Mapping[str, bytes]

    def __post_init__(self) -> None:
        """EncryptionKeyError unless the active key is in the ring and every key id and AES key
        length is valid."""
        if self.active_id not in self.keys:
            raise EncryptionKeyError(f"the active key {self.active_id!r} is not among the keys")
        for key_id, key in self.keys.items():
            if not _KEY_ID.fullmatch(key_id):
                raise EncryptionKeyError(f"key id {key_id!r} must be 1-64 of A-Z a-z 0-9 . _ -")
            if len(key) not in (16, 24, 32):
                raise EncryptionKeyError(f"key {key_id!r} has {len(key)} bytes; AES keys have 16, 24 or 32")
        _aead(self.keys[self.active_id])  # loads the cipher now rather than on the first payload

    def __repr__(self) -> str:  # never print key material
        """The active key id and the ids, never the key material."""
        return f"KeyRing(active_id={self.active_id!r}, ids={list(self.keys)!r})"

    def encrypt(self, plaintext: bytes, aad: bytes) -> tuple[str, bytes]:
        """``(key id, nonce + ciphertext)`` under the active key."""
        nonce = os.urandom(NONCE_BYTES)
        return self.active_id, nonce + _aead(self.keys[self.active_id]).encrypt(nonce, plaintext, aad)

    def decrypt(self, key_id: str, sealed: bytes, aad: bytes) -> bytes:
        """Open ``sealed`` (nonce + ciphertext) with the key ``key_id`` and the associated data
        ``aad``; EncryptionKeyError for a key this ring lacks or data that fails authentication."""
        key = self.keys.get(key_id)
        if key is None:
            raise EncryptionKeyError(
                f"data was encrypted with key {key_id!r}, which this process does not have (it has "
                f"{', '.join(self.keys)}); keep old keys in {KEYS_ENV} after the active one",
                key_id=key_id,
            )
        try:
            return _aead(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], aad)
        except Exception as err:  # InvalidTag: wrong key material or tampered data
            raise EncryptionKeyError(
                f"data under key {key_id!r} failed authentication (wrong key or altered data)", key_id=key_id
            ) from err


def _aead(key: bytes) -> AESGCM:
    # Imported here: a process without keys (most workers) never loads cryptography.
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


def parse_keys(entries: Iterable[str]) -> KeyRing | None:
    """A KeyRing from ``id:base64`` entries (first = active); None when there are none."""
    keys: dict[str, bytes] = {}
    for raw in entries:
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        key_id, sep, encoded = entry.partition(":")
        if not sep:
            raise EncryptionKeyError("an encryption key must look like id:base64key")
        if key_id in keys:
            raise EncryptionKeyError(f"key id {key_id!r} appears twice")
        try:
            padded = encoded.strip() + "=" * (-len(encoded.strip()) % 4)
            keys[key_id] = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            raise EncryptionKeyError(f"key {key_id!r} is not valid base64") from None
    if not keys:
        return None
    return KeyRing(active_id=next(iter(keys)), keys=keys)


class EncryptionSettings(EnvSettings):
    """The payload codec's settings (the table above); a bad value raises EncryptionKeyError."""

    keys: str | None = Field(default=None, validation_alias=KEYS_ENV)
    keys_file: Path | None = Field(default=None, validation_alias=KEYS_FILE_ENV)
    codec: str | None = Field(default=None, validation_alias=CODEC_ENV)
    """``package.module:factory`` of a PayloadCodec; wins over the keys."""

    @field_validator("keys", mode="after")
    @classmethod
    def _parses(cls, keys: str | None) -> str | None:
        # Checked when the settings are read, so a bad key stops a process at its start.
        if keys is not None:
            _named(KEYS_ENV, lambda: parse_keys(keys.split(",")))
        return keys

    @field_validator("keys_file", mode="after")
    @classmethod
    def _expand_user(cls, path: Path | None) -> Path | None:
        return path.expanduser() if path is not None else None

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if self.keys and self.keys_file:
            raise EncryptionKeyError(f"set {KEYS_ENV} or {KEYS_FILE_ENV}, not both")
        return self

    def keyring(self) -> KeyRing | None:
        """The key ring configured, if any; the keys file is read now, so a rotated file counts
        from the next load on."""
        if self.keys_file is not None:
            try:
                text = self.keys_file.read_text()
            except OSError as err:
                raise EncryptionKeyError(f"cannot read {KEYS_FILE_ENV} ({err.strerror})") from None
            return _named(KEYS_FILE_ENV, lambda: parse_keys(text.splitlines()))
        return parse_keys(self.keys.split(",")) if self.keys else None


def _named(variable: str, parse: Any) -> KeyRing | None:
    try:
        result: KeyRing | None = parse()
    except EncryptionKeyError as err:
        raise EncryptionKeyError(f"{variable}: {err}") from None
    return result


def keyring_from_env(env: Mapping[str, str] | None = None) -> KeyRing | None:
    """The key ring ``NOETA_ENCRYPTION_KEYS`` or ``NOETA_ENCRYPTION_KEYS_FILE`` configures, if any
    (from ``env``, else the process's environment)."""
    return EncryptionSettings.from_env(env).keyring()


def new_key_entry(key_id: str) -> str:
    """A fresh ``id:base64`` entry with a random 256-bit key."""
    return f"{key_id}:{base64.b64encode(os.urandom(32)).decode()}"


if __name__ == "__main__":  # python -m noeta.security.keys [id]
    import sys
    import time

    print(new_key_entry(sys.argv[1] if len(sys.argv) > 1 else time.strftime("k%Y%m%d")))
