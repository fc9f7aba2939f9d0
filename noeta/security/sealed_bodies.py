"""Content-store bodies encrypted at rest with the payload keys.

A sealed body is ``MAGIC + len(key id) + key id + nonce + ciphertext``; the body's sha256 (of the
plaintext, so content addressing and deduplication still work) is the AES-GCM associated data,
so a body cannot be swapped for another one under a different hash. Bodies written before
encryption was turned on have no MAGIC and are read as they are.
"""

from __future__ import annotations

from noeta.errors import ContentIntegrityError, EncryptionKeyError
from noeta.security.keys import KeyRing

MAGIC = b"\x00noeta-sealed-v1\x00"


class BodyCipher:
    """Seals and opens content-store bodies with a :class:`KeyRing`."""

    def __init__(self, keys: KeyRing) -> None:
        """``keys``: the key ring that seals (active key) and opens (any key in it)."""
        self.keys = keys

    def __repr__(self) -> str:
        """Name the cipher and its key ids, never the key material."""
        return f"BodyCipher({self.keys!r})"

    def seal(self, data: bytes, digest: str) -> bytes:
        """``data`` sealed under the active key, with the body's hash ``digest`` as associated data.
        """
        key_id, sealed = self.keys.encrypt(data, digest.encode())
        kid = key_id.encode()
        return MAGIC + bytes([len(kid)]) + kid + sealed

    def open(self, blob: bytes, digest: str) -> bytes:
        """The plaintext of a sealed body (a body without MAGIC is returned as it is):
        EncryptionKeyError naming the key when the ring lacks it, ContentIntegrityError when the
        body fails authentication against ``digest`` under a key the ring has (it was altered)."""
        if not blob.startswith(MAGIC):
            return blob
        rest = blob[len(MAGIC) :]
        try:
            kid = rest[1 : 1 + rest[0]].decode()
        except (IndexError, UnicodeDecodeError):
            raise _altered(digest, "its key id is unreadable") from None
        if kid not in self.keys.keys:
            return self.keys.decrypt(kid, rest[1 + rest[0] :], digest.encode())  # names the missing key
        try:
            return self.keys.decrypt(kid, rest[1 + rest[0] :], digest.encode())
        except EncryptionKeyError as err:
            raise _altered(digest, f"it fails authentication under key {kid!r}") from err


def _altered(digest: str, why: str) -> ContentIntegrityError:
    return ContentIntegrityError(
        f"sealed content {digest} is not the body stored under that hash ({why}: altered or damaged "
        "where it is stored); restore it from a backup or start the task again",
        digest=digest,
    )


def open_unsealed(blob: bytes, digest: str) -> bytes:
    """For a store without keys: a plain body as it is; a sealed one is an error that says why."""
    if blob.startswith(MAGIC):
        rest = blob[len(MAGIC) :]
        kid = rest[1 : 1 + rest[0]].decode("utf-8", "replace") if rest else ""
        raise EncryptionKeyError(
            f"content {digest[:12]}… is encrypted with key {kid!r}; configure NOETA_ENCRYPTION_KEYS "
            "with that key to read it",
            key_id=kid or None,
        )
    return blob


def cipher_from_env() -> BodyCipher | None:
    """The body cipher for ``NOETA_ENCRYPTION_KEYS`` / ``_FILE``, or None when no keys are set."""
    from noeta.security.keys import keyring_from_env

    keys = keyring_from_env()
    return BodyCipher(keys) if keys is not None else None
