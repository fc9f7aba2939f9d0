"""Deterministic workflow code. Imports nothing that does I/O (a test proves it)."""

from noeta.workflows.agent import AgentWorkflow
from noeta.workflows.builtin_policy import BuiltinPolicyWorkflow

#: The workflow types a worker registers (see noeta.protocols.names).
WORKFLOWS = (AgentWorkflow, BuiltinPolicyWorkflow)

__all__ = ["WORKFLOWS", "AgentWorkflow", "BuiltinPolicyWorkflow"]
