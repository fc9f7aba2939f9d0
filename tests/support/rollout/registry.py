"""The worker registry of the Worker Deployment tests: a refund tool that a guard holds for a
person's approval (``noeta worker --registry tests.support.rollout.registry:registry``)."""

from __future__ import annotations

from dataclasses import dataclass

from noeta.protocols.hooks import GuardContext, ProposedAction, ProposedToolCall, VerdictResult
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.tools import tool
from noeta.worker import Registry


@tool(name="refund", version="1", description="Refund an amount.",
      input_schema={"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]})
def refund(arguments: dict, ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output=f"refunded {arguments['amount']}")


@dataclass(frozen=True)
class HumanGuard:
    """Every refund waits for a person."""

    name: str = "human"

    def check(self, action: ProposedAction, ctx: GuardContext) -> VerdictResult:
        if isinstance(action, ProposedToolCall) and action.tool_name == "refund":
            return VerdictResult("ask", "refunds need a person")
        return VerdictResult("allow")


registry = Registry.of(tools=[refund], guards=[HumanGuard()])
