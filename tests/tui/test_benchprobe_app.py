"""`python -m tui.bench.probe_app app`: the real engine inside the app, driven as a person types."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_the_app_probe_reports_first_token_engine_ttft_and_decode(chatml_model: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tui.bench.probe_app", "app", "--model", str(chatml_model),
                           "--turns", "2", "--tokens", "6"], capture_output=True, text=True, timeout=240, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["turns"] == 2
    # Enter -> the first token reaching the app contains the engine's own time to first token.
    assert result["first_token_ms"] >= result["engine_ttft_ms"] > 0
    assert result["decode_tps"] > 0
