"""Pure types and interfaces of the seed API: no I/O, no Temporal imports."""

from noeta.protocols.decisions import (
    CallModel,
    CallTools,
    Decision,
    Finish,
    SpawnSubtask,
)
from noeta.protocols.event_log import EventEnvelope, Observer, Subscriber
from noeta.protocols.hooks import (
    Guard,
    GuardContext,
    ProposedAction,
    ProposedFinish,
    ProposedSpawnSubtask,
    ProposedToolCall,
    VerdictResult,
)
from noeta.protocols.messages import (
    Block,
    ContentRef,
    ImageBlock,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    Message,
    StreamDelta,
    StreamingProvider,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from noeta.protocols.policy import Policy
from noeta.protocols.statuses import GoalStatus, ResultStatus, TaskStatus, Verdict
from noeta.protocols.step_context import StepContext
from noeta.protocols.tool import Tool, ToolContext, ToolResult, ToolSpec
from noeta.protocols.view import View

__all__ = [
    "Block", "CallModel", "CallTools", "ContentRef", "Decision", "EventEnvelope", "Finish", "GoalStatus",
    "Guard", "GuardContext", "ImageBlock", "LLMProvider", "LLMRequest", "LLMResponse", "Message",
    "Observer", "Policy", "ProposedAction", "ProposedFinish", "ProposedSpawnSubtask",
    "ProposedToolCall", "ResultStatus", "SpawnSubtask", "StepContext", "StreamDelta", "StreamingProvider",
    "Subscriber", "TaskStatus", "TextBlock", "ThinkingBlock", "Tool", "ToolContext", "ToolResult", "ToolResultBlock", "ToolSpec",
    "ToolUseBlock", "Usage", "Verdict", "VerdictResult", "View",
]
