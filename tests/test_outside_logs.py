"""What transformers and huggingface_hub say reaches stderr as our one-line warnings (issue #29,
item 12): their loggers write straight to stderr with their own prefix (``[transformers] ...``),
over `run`'s output or the app's screen, and Python warnings print two lines with a file name.
Checked in fresh interpreters: the libraries set their handlers up when first imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path),
           "XDG_DATA_HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    return subprocess.run([sys.executable, *code], capture_output=True, text=True, cwd=ROOT, timeout=180, env=env)


def test_library_logs_and_warnings_are_our_one_line(tmp_path: Path) -> None:
    code = ("import logging, warnings\n"
            "from engine.core.outside_logs import route_outside_logs\n"
            "route_outside_logs()\n"
            "logging.getLogger('transformers.models.auto').warning('first\\nsecond \\x1b[31m')\n"
            "logging.getLogger('huggingface_hub.file_download').warning('from the hub')\n"
            "logging.getLogger('transformers').info('not shown: below warning')\n"
            "warnings.warn('a future change', FutureWarning)\n")
    done = _python(["-c", code], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["logitscope: warning: first second ␛[31m",
                                        "logitscope: warning: from the hub",
                                        "logitscope: warning: FutureWarning: a future change"]


def test_a_tokenizer_warning_during_run_has_our_prefix(chatml_model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "odd-tokenizer"
    shutil.copytree(chatml_model, folder)
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "tokenizer_class": "LlamaTokenizer", "model_max_length": 64}))
    # a prompt over the context: the run ends after the load, without a forward pass
    done = _python(["-m", "tui.headless", "run", "--no-config", "--model", str(folder),
                    "--prompt", "hello the cat " * 300], tmp_path)
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and lines, done.stderr
    assert all(line.startswith("logitscope: ") for line in lines), done.stderr
    assert any("tokenizer_class" in line for line in lines) and "over the context" in lines[-1]
