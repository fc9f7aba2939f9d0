"""Secret scrubbing: configured keys and key-shaped strings are replaced before text reaches
history, events or logs.

The secrets known to a process are the values of environment variables whose names look like
credentials (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``, ``NOETA_API_KEYS``,
``NOETA_ENCRYPTION_KEYS``) plus every key a provider was constructed with
(:func:`register_secret`). Key-shaped strings (``sk-…``, ``Bearer …``, AWS/GitHub/Slack/Google
key formats) are replaced even when nobody registered them.
"""

from __future__ import annotations

import os
import re
import threading

REDACTED = "[REDACTED]"
_MIN_SECRET = 8  # shorter values would redact ordinary words
_SECRET_ENV = re.compile(r"(_API_KEYS?|_TOKENS?|_SECRET|_PASSWORD|_ENCRYPTION_KEYS)$")
_KEY_SHAPED = re.compile(
    r"(?:"
    r"\bsk-[A-Za-z0-9_\-]{16,}"  # OpenAI / Anthropic (sk-ant-…) style
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|\bxox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack tokens
    r"|\bAIza[0-9A-Za-z_\-]{30,}"  # Google API keys
    r"|\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"  # JWTs
    r")"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}")
_KEY_ASSIGNMENT = re.compile(r"(?i)\b((?:api[_-]?key|x-api-key|access[_-]?token|secret|password)[\"']?\s*[:=]\s*[\"']?)[^\s\"',;&}]{8,}")

_lock = threading.Lock()
_registered: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember ``value`` (e.g. a provider's API key) so it is scrubbed wherever it shows up."""
    if value and len(value) >= _MIN_SECRET:
        with _lock:
            _registered.add(value)


def known_secrets() -> list[str]:
    """Registered keys and credential-like environment values, longest first."""
    found = {v for k, v in os.environ.items() if _SECRET_ENV.search(k.upper()) and v}
    values: set[str] = set()
    for value in found:  # lists such as NOETA_API_KEYS=a,b or id:key entries
        values.add(value)
        for part in re.split(r"[,\s]+", value):
            values.add(part)
            values.add(part.partition(":")[2])
    with _lock:
        values |= _registered
    return sorted((v for v in values if len(v) >= _MIN_SECRET), key=len, reverse=True)


def scrub(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with known secrets and key-shaped strings replaced by ``[REDACTED]``."""
    if not text:
        return text
    for secret in known_secrets() if secrets is None else secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = _KEY_SHAPED.sub(REDACTED, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    return _KEY_ASSIGNMENT.sub(lambda m: m.group(1) + REDACTED, text)


def scrub_exception(exc: BaseException) -> BaseException:
    """Scrub ``exc`` and its cause/context chain in place (message, args, a ``message``
    attribute): Temporal records the whole chain in history when an activity fails."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(scrub(a) if isinstance(a, str) else a for a in current.args)
        message = getattr(current, "message", None)
        if isinstance(message, str):
            try:
                current.message = scrub(message)  # type: ignore[attr-defined]
            except AttributeError:  # a read-only property
                pass
        current = current.__cause__ or current.__context__
    return exc
