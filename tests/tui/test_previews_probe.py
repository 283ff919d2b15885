"""`python -m tui.bench.probe_app previews`: key -> screen timed while the real engine computes previews."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_the_previews_probe_times_keys_while_previews_compute(chatml_model: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tui.bench.probe_app", "previews", "--model", str(chatml_model),
                           "--presses", "3"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert 1 <= result["presses"] <= 3
    assert 0 < result["key_ms_median"] <= result["key_ms_max"]
