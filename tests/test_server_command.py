"""``noeta server`` passes its ports and the UI's codec endpoint to the dev server it starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.processes import ROOT, free_port


@pytest.mark.server
def test_noeta_server_listens_where_told_and_points_the_ui_at_the_codec_server(tmp_path: Path):
    port, ui_port = free_port(), free_port()
    codec = "http://127.0.0.1:8089/some-token"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
    env.update(NOETA_HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "noeta", "server", "--port", str(port), "--ui-port", str(ui_port),
         "--ui-codec-endpoint", codec],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first == f"Temporal dev server at 127.0.0.1:{port}, UI http://127.0.0.1:{ui_port}\n", (
            first + proc.stderr.read() if proc.stderr else first
        )
        # The UI serves the browser its settings: the codec endpoint is what the flag said.
        # (The UI listens a moment after the server says where: on a loaded machine, a few seconds.)
        settings = _ui_settings(ui_port, seconds=60)
        assert settings["Codec"]["Endpoint"] == codec
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0


def _ui_settings(ui_port: int, seconds: float) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/api/v1/settings", timeout=10) as reply:
                return json.load(reply)  # type: ignore[no-any-return]
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_noeta_server_refuses_a_codec_endpoint_that_is_not_a_url():
    from noeta.cli.parser import build

    with pytest.raises(SystemExit):
        build().parse_args(["server", "--ui-codec-endpoint", "127.0.0.1:8089"])
    args = build().parse_args(["server", "--ui-codec-endpoint", "https://codec.example.com/t/"])
    assert args.ui_codec_endpoint == "https://codec.example.com/t"
