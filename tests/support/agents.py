"""The agent catalog of the versioned-agent tests (``NOETA_AGENTS=tests.support.agents:agents``):
``triage`` 1 is thorough, 2 terse; the provider answers by the system prompt it is sent (stateless:
any worker process answers alike; ``noeta worker --registry tests.support.agents:registry``)."""

from __future__ import annotations

from noeta.client.agents import Agents
from noeta.client.options import Options
from noeta.protocols.messages import LLMRequest, LLMResponse
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry
from tests.support.scripts import say


def by_prompt(request: LLMRequest) -> LLMResponse:
    terse = "terse" in (request.system or "")
    return say("short." if terse else f"a thorough answer to {request.messages[0].text}")


provider = FakeLLMProvider(responder=by_prompt)
agents = Agents()
agents.add("triage", 1, Options(provider=provider, system_prompt="You triage tickets. Be thorough."))
agents.add("triage", 2, Options(provider=provider, system_prompt="You triage tickets. Be terse."))
registry = Registry.of(providers=[provider])
