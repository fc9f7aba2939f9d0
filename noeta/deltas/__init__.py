"""Streamed pieces of model responses (``StreamDelta``) from any worker to any client.

History records only final responses. Deltas travel on each task's workflow stream
(:mod:`noeta.deltas.workflow_stream`, through Temporal alone: any client reads it from an offset),
and through a broker: in-process (a worker's own process, ``query()``) or, with
``NOETA_DELTA_BROKER=redis://host:6379/0``, Redis pub/sub, one channel per task (docs/streaming.md).
"""

from noeta.deltas.broker import (
    DELTA_BROKER_VARIABLE,
    DeltaBroker,
    InProcessBroker,
    Subscription,
    broker_for,
    in_process_broker,
)

__all__ = ["DELTA_BROKER_VARIABLE", "DeltaBroker", "InProcessBroker", "Subscription", "broker_for", "in_process_broker"]
