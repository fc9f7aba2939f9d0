"""An MCP server that asks the client's model (``sampling/createMessage``) during a tool call: with
``sampling`` allowed on the server, the task's provider answers it as a recorded model call of the
task (its events, its usage, its guards), and the tool completes with the answer; not allowed, the
request is refused and the call fails with McpSamplingNotAllowedError."""

from __future__ import annotations

from dataclasses import dataclass

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.protocols.hooks import VerdictResult
from noeta.protocols.sampling import ProposedSampling
from noeta.worker import Registry, build_worker
from tests.support.mcp_sampling_registry import SUMMARY, summarizing
from tests.support.mcp_server import running_http_server
from noeta.sdk.testing import FakeLLMProvider


def options(url: str, sampling: bool | None, **more) -> Options:
    server = {"type": "http", "url": url, **({} if sampling is None else {"sampling": sampling})}
    return Options(provider="sampling", mcp_servers={"sampler": server}, **more)


@dataclass(frozen=True)
class NoSampling:
    """Denies every MCP server's request for the task's model."""

    name: str = "no-sampling"

    def check(self, action, ctx) -> VerdictResult:
        if isinstance(action, ProposedSampling):
            return VerdictResult("deny", f"{action.server} may not use the model")
        return VerdictResult("allow")


async def run(client: AsyncClient, content_store, task_queue: str, sampling: bool | None, *guards):
    """A task calling ``summarize`` to its end: its id, result and the provider that answered."""
    provider = FakeLLMProvider(responder=summarizing)
    reg = Registry.of(providers={"sampling": provider}, guards=list(guards), content_store=content_store)
    with running_http_server(asking=True) as url:
        async with build_worker(client.temporal, reg, task_queue):
            task_id = await client.start("go", options(url, sampling, guards=list(guards)), task_queue=task_queue)
            return task_id, await client.result(task_id), provider


def sampled(provider: FakeLLMProvider) -> list:
    """The requests the server's sampling made of the provider."""
    return [r for r in provider.received_requests if r.system == "You summarize in five words."]


async def test_the_tasks_model_answers_the_server_and_counts_as_the_tasks_call(client: AsyncClient, content_store, task_queue):
    task_id, result, provider = await run(client, content_store, task_queue, True)
    # the model's name, as the server gets it: the task's model, else its provider's
    assert result.answer == f"tool said: summary by sampling: {SUMMARY}", result.answer
    (request,) = sampled(provider)
    assert request.max_tokens == 64 and not request.tools
    assert "Summarize: the quarterly report" in request.messages[0].content[0].text
    # three model calls of the task: the call of the tool, the server's request, the answer
    assert result.counts.model_calls == 3
    assert result.usage.output == 3 + 7 + 5
    events = await client.events(task_id)
    kinds = [e.type for e in events if e.type.startswith(("Sampling", "ProviderCall", "ToolCall"))]
    assert kinds == [
        "ProviderCallStarted", "ProviderCallCompleted", "ToolCallProposed", "ToolCallStarted", "SamplingRequested",
        "ProviderCallStarted", "ProviderCallCompleted", "SamplingAnswered", "ToolCallStarted", "ToolCallCompleted",
        "ProviderCallStarted", "ProviderCallCompleted",
    ], kinds
    requested = next(e.payload for e in events if e.type == "SamplingRequested")
    assert (requested.call_id, requested.server, requested.tool_call_id, requested.max_tokens) == ("sample:s1:1", "sampler", "s1", 64)
    answered = next(e.payload for e in events if e.type == "SamplingAnswered")
    assert (answered.call_id, answered.text) == ("sample:s1:1", SUMMARY)
    messages = await client.messages(task_id)
    assert not any(SUMMARY == getattr(m, "text", None) for m in messages)  # the server's, not the task's conversation


async def test_sampling_not_allowed_is_refused_and_the_call_fails_typed(client: AsyncClient, content_store, task_queue):
    task_id, result, provider = await run(client, content_store, task_queue, None)
    assert not sampled(provider)
    failed = [e.payload for e in await client.events(task_id) if e.type == "ToolCallFailed"]
    assert [f.error_type for f in failed] == ["McpSamplingNotAllowedError"]
    assert '"sampling": true' in failed[0].error
    assert "asked the task's model (sampling/createMessage), which its configuration does not allow" in result.answer
    assert result.counts.model_calls == 2


async def test_a_guard_denies_the_request_and_the_server_gets_the_refusal(client: AsyncClient, content_store, task_queue):
    _, result, provider = await run(client, content_store, task_queue, True, NoSampling())
    assert not sampled(provider)
    assert "sampling refused: " in result.answer and "sampler may not use the model" in result.answer, result.answer
