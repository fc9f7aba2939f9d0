"""A registry for worker subprocesses that summarize (``--registry
tests.support.compaction_registry:registry``): the windowed provider of tests/support/windowed.py,
logging each summarizing call's start and end to ``$NOETA_TEST_LOG``. With
``NOETA_TEST_HANG_SUMMARY`` set, the process's first summarizing call never returns (its worker is
killed during it)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from noeta.protocols.messages import LLMRequest, LLMResponse
from noeta.worker import Registry
from tests.support.windowed import WindowedProvider, fetch


class LoggedWindowed(WindowedProvider):
    def complete(self, request: LLMRequest) -> LLMResponse:
        if request.metadata.get("purpose") != "compaction":
            return super().complete(request)
        key = request.metadata.get("step_key")
        log = Path(os.environ["NOETA_TEST_LOG"])
        with log.open("a") as f:
            f.write(f"start {key} pid={os.getpid()}\n")
        if os.environ.get("NOETA_TEST_HANG_SUMMARY") and not self.summaries:
            threading.Event().wait()  # killed in here
        response = super().complete(request)
        with log.open("a") as f:
            f.write(f"done {key} pid={os.getpid()}\n")
        return response


registry = Registry.of(tools=[fetch], providers={"windowed": LoggedWindowed(window=4000, turns=16, name="windowed")})
