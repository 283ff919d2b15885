"""Loading a tokenizer through transformers prints nothing on the terminal: without PyTorch,
transformers announces "PyTorch was not found..." at import, which would land on the app's screen
(a server's tokenizer loads while the TUI runs) and on `logitscope run`'s stderr. mlx-lm silences
it when it is imported first; any engine module that reaches transformers without mlx-lm must too.
Checked in a fresh interpreter (the switch is read at import), with stderr captured.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SWITCH = "TRANSFORMERS_NO_ADVISORY_WARNINGS"


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="with PyTorch there is nothing to say")
def test_a_tokenizer_through_transformers_prints_nothing(tiny: Path) -> None:
    code = (
        "import sys\n"
        "from engine.remote.tokens import load_tokenizer\n"
        f"tokenizer = load_tokenizer({str(tiny)!r})\n"
        "assert 'mlx_lm' not in sys.modules  # transformers came first\n"
        "print('loaded')\n"
    )
    env = {key: value for key, value in os.environ.items() if key != SWITCH}  # as a user's shell has it
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == "loaded\n" and result.stderr == ""
