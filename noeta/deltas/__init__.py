"""Streamed pieces of model responses (``StreamDelta``) from any worker to any client.

History records only final responses; deltas travel through a broker. ``NOETA_DELTA_BROKER``
(``redis://host:6379/0``) makes it Redis pub/sub, one channel per task, so a ``Client`` in one
process receives what a ``noeta worker`` in another streams; unset, deltas stay inside the process
that runs the worker (the embedded case, ``query()``).
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
