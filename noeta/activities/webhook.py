"""The approval webhook: a signed POST to an operator's URL when an action starts waiting for a
human, retried on failure (docs/guards.md, "The inbox").

=====================================  ========================================================
variable (on the workers)              meaning
=====================================  ========================================================
``NOETA_APPROVAL_WEBHOOK_URL``         where to POST (unset: no webhook)
``NOETA_APPROVAL_WEBHOOK_SECRET``      HMAC-SHA256 key of the signature (at least 16 characters)
=====================================  ========================================================

The body is JSON: ``{"event": "approval_requested", "task_id", "tenant", "call_id", "action",
"guard", "reason", "requested_at"}``. Headers: ``X-Noeta-Delivery`` (``task_id/call_id``: the same for a
repeated delivery, so a receiver can drop duplicates) and ``X-Noeta-Signature:
t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`` (a receiver checks it and refuses old
``t``). A delivery is tried up to ATTEMPTS times with doubling delays until the receiver answers
2xx; it runs beside the guard check, so a slow or failing receiver never delays the task. A
worker that stops while retrying drops the delivery: the inbox still lists the action.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from datetime import datetime, timezone
from typing import Any

import httpx
from temporalio.client import Client as TemporalClient
from temporalio.service import RPCError
from pydantic import Field, field_validator
from pydantic_core import to_jsonable_python

from noeta.config.settings import EnvSettings
from noeta.errors import ConfigurationError
from noeta.protocols.hooks import GuardDecision, ProposedAction
from noeta.protocols.names import DEFAULT_TENANT, SUBTASK_SEPARATOR
from noeta.temporal.search_attributes import TENANT

logger = logging.getLogger(__name__)

#: Deliveries of one notification at most.
ATTEMPTS = 5
#: The delay before the second attempt; each later one waits twice as long.
FIRST_RETRY_SECONDS = 1.0
#: How long one attempt may take.
ATTEMPT_TIMEOUT_SECONDS = 10.0
SIGNATURE_HEADER = "X-Noeta-Signature"
DELIVERY_HEADER = "X-Noeta-Delivery"


class WebhookSettings(EnvSettings):
    """``NOETA_APPROVAL_WEBHOOK_URL`` and ``NOETA_APPROVAL_WEBHOOK_SECRET`` (both or neither)."""

    url: str | None = Field(default=None, validation_alias="NOETA_APPROVAL_WEBHOOK_URL")
    secret: str | None = Field(default=None, validation_alias="NOETA_APPROVAL_WEBHOOK_SECRET", repr=False)

    @field_validator("url", mode="after")
    @classmethod
    def _http(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ConfigurationError("NOETA_APPROVAL_WEBHOOK_URL must be an http(s) URL")
        return url

    def webhook(self) -> ApprovalWebhook | None:
        """The webhook configured, if any; ConfigurationError for a URL without a secret (an
        unsigned notification could be forged) or a short secret."""
        if self.url is None:
            return None
        if not self.secret or len(self.secret) < 16:
            raise ConfigurationError("NOETA_APPROVAL_WEBHOOK_SECRET (at least 16 characters) signs the approval webhook")
        return ApprovalWebhook(self.url, self.secret)


def approval_requested(task_id: str, action: ProposedAction, decision: GuardDecision) -> dict[str, Any]:
    """The webhook body for ``action`` of ``task_id`` sent to a human by ``decision``."""
    return {
        "event": "approval_requested",
        "task_id": task_id,
        "call_id": action.call_id,
        "action": to_jsonable_python(action),
        "guard": decision.guard,
        "reason": decision.reason,
        "requested_at": datetime.now(timezone.utc).isoformat(),
    }


async def _tenant(temporal: TemporalClient, task_id: str) -> str | None:
    """The task's tenant (a sub-agent's: its root task's NoetaTenant); None when it cannot be read."""
    try:
        described = await temporal.get_workflow_handle(task_id.split(SUBTASK_SEPARATOR, 1)[0]).describe()
    except RPCError:
        return None
    return described.typed_search_attributes.get(TENANT) or DEFAULT_TENANT


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The ``X-Noeta-Signature`` value of ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


class ApprovalWebhook:
    """Sends signed approval notifications in the background, with retries."""

    def __init__(self, url: str, secret: str, first_retry_seconds: float = FIRST_RETRY_SECONDS) -> None:
        """``url``: where to POST; ``secret``: the signing key."""
        self.url, self._secret, self._first_retry = url, secret, first_retry_seconds
        self._sending: set[asyncio.Task[bool]] = set()

    def notify(self, payload: dict[str, Any], temporal: TemporalClient | None = None) -> None:
        """Deliver ``payload`` in the background (returns at once); with ``temporal``, the task's
        tenant is looked up and added first."""
        task = asyncio.ensure_future(self.deliver(payload, temporal))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def deliver(self, payload: dict[str, Any], temporal: TemporalClient | None = None) -> bool:
        """POST ``payload`` (with the task's tenant, when ``temporal`` can tell it) until the
        receiver answers 2xx, at most ATTEMPTS times; whether it did."""
        if temporal is not None:
            payload = {**payload, "tenant": await _tenant(temporal, str(payload.get("task_id")))}
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        delivery = f"{payload.get('task_id')}/{payload.get('call_id')}"
        delay = self._first_retry
        async with httpx.AsyncClient(timeout=ATTEMPT_TIMEOUT_SECONDS) as http:
            for attempt in range(1, ATTEMPTS + 1):
                headers = {
                    "content-type": "application/json",
                    DELIVERY_HEADER: delivery,
                    SIGNATURE_HEADER: signature(self._secret, int(time.time()), body),
                }
                try:
                    response = await http.post(self.url, content=body, headers=headers)
                    if response.is_success:
                        return True
                    problem = f"HTTP {response.status_code}"
                except httpx.HTTPError as err:
                    problem = type(err).__name__
                logger.warning("approval webhook for %s: attempt %d of %d failed (%s)", delivery, attempt, ATTEMPTS, problem)
                if attempt < ATTEMPTS:
                    await asyncio.sleep(delay)
                    delay *= 2
        logger.error("approval webhook for %s: gave up after %d attempts", delivery, ATTEMPTS)
        return False
