"""Connecting to Temporal: the configured cluster, or the embedded dev server started on demand."""

from __future__ import annotations

import asyncio

from temporalio.client import Client as TemporalClient
from temporalio.converter import PayloadCodec
from temporalio.runtime import Runtime
from temporalio.service import RPCError

from noeta.client.config import Settings
from noeta.client.embedded import EmbeddedServer, ensure_server
from noeta.errors import TemporalUnavailableError
from noeta.worker.plugin import NoetaPlugin


async def connect_temporal(
    settings: Settings,
    connect_timeout: float | None = None,
    *,
    codec: PayloadCodec | None = None,
    runtime: Runtime | None = None,
) -> tuple[TemporalClient, EmbeddedServer | None]:
    """Connect to the configured cluster, starting the embedded dev server when none is set.
    ``codec``: the payload codec (default: the environment's, see noeta.security.codec);
    ``runtime``: a Temporal Runtime exporting metrics (noeta.telemetry.metrics.runtime_for);
    ``connect_timeout``: seconds to keep retrying (default: ``settings.connect_timeout_seconds``)."""
    from noeta.security.codec import codec_from_env

    server = None
    if settings.embedded:
        server = await asyncio.to_thread(ensure_server, settings.home / "temporal")
    connect_config = settings.temporal_connect_config(server.address if server else None)
    timeout = settings.connect_timeout_seconds if connect_timeout is None else connect_timeout
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            client = await TemporalClient.connect(
                **connect_config,
                plugins=[NoetaPlugin(codec=codec or codec_from_env())],
                runtime=runtime,
            )
            if server is not None:
                # A data directory made by an older release lacks the search attributes added
                # since (the dev server registers its flags' attributes only in a new database).
                from noeta.client.visibility import register_search_attributes

                try:
                    await register_search_attributes(client)
                except RPCError:
                    pass  # tasks run without the missing ones (see AsyncClient.indexed)
                else:
                    server.record_search_attributes()
            return client, server
        except RuntimeError as err:
            # A freshly started server (ours, or a cluster starting beside us) accepts TCP a moment
            # before it serves gRPC: retry until the deadline, then say what to fix.
            if asyncio.get_running_loop().time() > deadline:
                where = connect_config.get("target_host")
                raise TemporalUnavailableError(
                    f"cannot connect to Temporal at {where} ({_connect_problem(err)}). "
                    "Check TEMPORAL_ADDRESS (unset it to use the embedded dev server)"
                ) from err
            await asyncio.sleep(0.2)


def _connect_problem(err: BaseException) -> str:
    text = str(err).strip("'\" ")
    for known in ("Connection refused", "timed out", "dns error", "certificate", "Unauthenticated"):
        if known.lower() in text.lower():
            return known.lower()
    return text[:200] or type(err).__name__
