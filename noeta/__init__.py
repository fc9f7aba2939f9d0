"""Noeta: LLM agents as durable Temporal workflows.

The public surface is :mod:`noeta.sdk`; test doubles live in :mod:`noeta.sdk.testing`.
"""

__version__ = "0.1.0"
