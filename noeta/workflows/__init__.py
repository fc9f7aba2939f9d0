"""Deterministic workflow code. Imports nothing that does I/O (a test proves it)."""

from noeta.workflows.agent import AgentWorkflow

__all__ = ["AgentWorkflow"]
