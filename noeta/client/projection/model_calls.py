"""Model calls in history, as envelopes: an activity's scheduled and closing events, or (with
``model_local_activity``) one local-activity marker whose activity id names the call
(noeta.protocols.local_model_calls)."""

from __future__ import annotations

from typing import Any

from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent, MarkerRecordedEventAttributes

from noeta.client.projection.log import EnvelopeLog
from noeta.client.projection.payloads import decode_first, earlier_attempts, failure_text, retry_fields
from noeta.client.projection.transcript import Transcript
from noeta.protocols import event_log as ev
from noeta.protocols.activity_io import CallModelOutput
from noeta.protocols.attempts import AttemptFailure
from noeta.protocols.local_model_calls import ModelCallStart, model_call_start
from noeta.protocols.messages import Message, TextBlock
from noeta.protocols.sampling import SamplingCall, sampling_id


class ModelCalls:
    """Records a run's model calls (their start, retries and outcome) and their answers into the
    transcript."""

    def __init__(self, log: EnvelopeLog, transcript: Transcript) -> None:
        """Records into ``log``; answers join ``transcript``."""
        self._log = log
        self._transcript = transcript
        self._samples: dict[str, int] = {}  # tool call id -> its sampling requests so far

    def sampling_requested(self, tool_call_id: str, tool_name: str, request: Any, event: HistoryEvent, cause: int) -> None:
        """A tool call stopped because its MCP server asked the task's model (numbered per call
        from 1, as noeta.workflows.sampling numbers them)."""
        asked = request if isinstance(request, dict) else {}
        self._samples[tool_call_id] = self._samples.get(tool_call_id, 0) + 1
        messages = asked.get("messages")
        max_tokens = asked.get("maxTokens")
        self._log.emit(
            ev.SamplingRequested(
                sampling_id(tool_call_id, self._samples[tool_call_id]), tool_call_id, tool_name,
                str(asked.get("server") or ""), len(messages) if isinstance(messages, list) else 0,
                max_tokens if isinstance(max_tokens, int) else None,
            ),
            f"tool:{tool_name}", event, cause,
        )

    def started(self, call: ModelCallStart, event: HistoryEvent, *, local: bool = False) -> int:
        """A model call began (``local``: as a local activity, whose marker also ends it)."""
        return self._log.emit(
            ev.ProviderCallStarted(
                provider=call.provider, model=call.model, turn=call.turn, messages_appended=call.messages_appended,
                local=local,
            ),
            "engine",
            event,
            self._transcript.last_message_seq,
        )

    def local_call(self, attrs: MarkerRecordedEventAttributes, data: dict[str, Any], event: HistoryEvent) -> None:
        """A model call's local-activity marker (``model_local_activity``): ProviderCallStarted, then
        its retries and ProviderCallCompleted (or ProviderCallFailed), both with ``local`` set."""
        call = model_call_start(str(data.get("activity_id", "")))
        if call is None:
            return
        seq = self.started(call, event, local=True)
        if "result" in attrs.details:
            self.answered(decode_first(attrs.details["result"], CallModelOutput), call.provider, event, seq, local=True)
        elif attrs.HasField("failure"):
            self.failed(call.provider, attrs.failure, int(data.get("attempt") or 1), event, seq, local=True)

    def answered(
        self, out: CallModelOutput, provider: str, event: HistoryEvent, cause: int, *, local: bool = False,
        sampling: SamplingCall | None = None,
    ) -> None:
        """A model call answered (on ``provider``: the task's, or a fallback provider's): its
        retries, its completion and the answer in the transcript (``sampling``: an MCP server's
        request the call answered, whose answer joins no transcript)."""
        actor = f"provider:{provider}"
        for failed in out.retried:
            self._retried(provider, failed, event, cause)
        seq = self._log.emit(
            ev.ProviderCallCompleted(
                provider=provider, stop_reason=out.response.stop_reason, usage=out.response.usage, attempt=out.attempt,
                local=local,
            ),
            actor,
            event,
            cause,
        )
        if sampling is not None:
            text = "".join(b.text for b in out.response.content if isinstance(b, TextBlock))
            self._log.emit(
                ev.SamplingAnswered(sampling.call_id, sampling.server, text, out.response.stop_reason), actor, event, seq
            )
            return
        self._transcript.append([Message(role="assistant", content=out.response.content)], actor, event, seq)

    def failed(
        self, provider: str, failure: Failure, attempt: int, event: HistoryEvent, cause: int, *, local: bool = False
    ) -> None:
        """A model call failed for good: its earlier attempts, then the failure."""
        message, error_type = failure_text(failure)
        for failed in earlier_attempts(failure):
            self._retried(provider, failed, event, cause)
        self._log.emit(
            ev.ProviderCallFailed(provider=provider, error=message, error_type=error_type, attempt=attempt, local=local),
            f"provider:{provider}",
            event,
            cause,
        )

    def _retried(self, provider: str, failed: AttemptFailure, event: HistoryEvent, cause: int) -> None:
        """An attempt of a model call failed and the call was retried."""
        retried = ev.ProviderCallRetried(provider=provider, **retry_fields(failed), retry_after=failed.retry_after)
        self._log.emit(retried, f"provider:{provider}", event, cause)


__all__ = ["ModelCalls"]
