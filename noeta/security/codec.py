"""Payload encryption: every payload Noeta writes to Temporal is AES-GCM ciphertext.

:class:`EncryptionCodec` is a temporalio ``PayloadCodec``. An encrypted payload carries its key id
in its metadata, so after a rotation the old keys (kept after the active one) still decrypt old
tasks. Payloads that are not encrypted (tasks from before encryption was turned on) pass through
unchanged. :func:`codec_from_env` is the one place that decides which codec a process uses:

- ``NOETA_CODEC=package.module:factory`` — your own codec (e.g. envelope encryption with a KMS);
  ``factory()`` returns a ``PayloadCodec``.
- else ``NOETA_ENCRYPTION_KEYS`` / ``NOETA_ENCRYPTION_KEYS_FILE`` (see :mod:`noeta.security.keys`).
- else no codec: payloads are plain JSON (the embedded default).

Client, workers and the codec server must use the same keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeGuard

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from noeta.errors import EncryptionKeyError
from noeta.config.import_path import load_object
from noeta.security.keys import CODEC_ENV, EncryptionSettings, KeyRing
ENCODING = b"binary/encrypted"
CIPHER = b"AES-GCM"
KEY_ID_KEY = "encryption-key-id"
CIPHER_KEY = "encryption-cipher"
_AAD = b"noeta/payload/"


class EncryptionCodec(PayloadCodec):
    """AES-GCM over each whole serialized payload (metadata included); the key id is the AAD's tail,
    so a payload cannot be re-labelled with another key id."""

    def __init__(self, keys: KeyRing) -> None:
        """``keys``: the key ring that encrypts (active key) and decrypts (any key in it)."""
        self.keys = keys

    def __repr__(self) -> str:
        """Name the codec and its key ids, never the key material."""
        return f"EncryptionCodec({self.keys!r})"

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Encrypt every payload (the Temporal codec interface)."""
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Decrypt every payload (the Temporal codec interface)."""
        return [self.decrypt(p) for p in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        """``payload`` serialized and sealed under the active key, as a ``binary/encrypted``
        payload."""
        key_id, sealed = self.keys.encrypt(payload.SerializeToString(), _AAD + self.keys.active_id.encode())
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID_KEY: key_id.encode(), CIPHER_KEY: CIPHER},
            data=sealed,
        )

    def decrypt(self, payload: Payload) -> Payload:
        """The original payload of a sealed one; a payload that is not encrypted is returned as it
        is. EncryptionKeyError for an unknown key, another cipher or data that fails
        authentication."""
        if payload.metadata.get("encoding") != ENCODING:
            return payload  # written before encryption was on
        key_id = payload.metadata.get(KEY_ID_KEY, b"").decode()
        if payload.metadata.get(CIPHER_KEY, CIPHER) != CIPHER:
            raise EncryptionKeyError(f"payload cipher {payload.metadata[CIPHER_KEY]!r} is not {CIPHER!r}")
        plain = Payload()
        plain.ParseFromString(self.keys.decrypt(key_id, payload.data, _AAD + key_id.encode()))
        return plain


def sealed_key_id(payload: Payload) -> str | None:
    """The id of the key an encrypted payload is sealed with; None for a payload that is not
    encrypted."""
    if payload.metadata.get("encoding") != ENCODING:
        return None
    return payload.metadata.get(KEY_ID_KEY, b"").decode(errors="replace") or "?"


def no_keys_error(key_id: str) -> EncryptionKeyError:
    """The error of a process without encryption keys that meets data sealed with ``key_id``."""
    return EncryptionKeyError(
        f"this task's data is encrypted with key {key_id!r}, and this process has no encryption keys: "
        "set NOETA_ENCRYPTION_KEYS (or NOETA_ENCRYPTION_KEYS_FILE) to the keys its workers use",
        key_id=key_id,
    )


def refuse_sealed(payload: Payload) -> None:
    """EncryptionKeyError naming the key when ``payload`` is encrypted (for readers without a codec)."""
    key_id = sealed_key_id(payload)
    if key_id is not None:
        raise no_keys_error(key_id)


def _is_codec(value: object) -> TypeGuard[PayloadCodec]:
    return isinstance(value, PayloadCodec)


def load_codec_factory(path: str) -> PayloadCodec:
    """``module:factory`` imported and called; the result must be a PayloadCodec."""
    return load_object(path, _is_codec, "PayloadCodec", CODEC_ENV)


def codec_from_env(env: Mapping[str, str] | None = None) -> PayloadCodec | None:
    """The codec this process's environment configures, or None (plain payloads)."""
    settings = EncryptionSettings.from_env(env)
    if settings.codec:
        return load_codec_factory(settings.codec)
    keys = settings.keyring()
    return EncryptionCodec(keys) if keys is not None else None
