"""`logitscope run` under hostile input: every refusal is one short line with one prefix, before
any model loads where it can be; nothing from transformers leaks after our own line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import Recorder, isolated_config  # noqa: F401 - the fixture keeps the user's config out

from tui.headless.run import main

MAX_LINE = 500

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("argv", "flag"), [(["--prompt", "a\udcffb"], "--prompt"),
                                            (["--prompt", "ok", "--system", "\udcc3("], "--system")])
def test_invalid_utf8_is_refused_before_any_engine_starts(argv: list[str], flag: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    factory = Recorder()
    assert main(["run", "--model", "m", *argv], engine_factory=factory) == 2
    assert capsys.readouterr() == ("", f"logitscope: {flag} is not valid UTF-8 text\n")
    assert factory.engines == []


def test_a_huge_value_is_echoed_shortened(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    huge = "x" * 2_000_000
    config = tmp_path / "big.toml"
    config.write_text(f'[model]\ndefault = "{huge}"\n[sampling]\ntemperature = "{huge}"\n')
    factory = Recorder(load_error=f"model folder not found: {huge}")
    assert main(["run", "--config", str(config), "--prompt", "hi"], engine_factory=factory) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and all(len(line) <= MAX_LINE for line in lines)
    assert lines[0].startswith("logitscope: warning: ")
    assert lines[1].startswith("logitscope: model folder not found: xxx") and lines[1].endswith("xxx")


@pytest.mark.parametrize("argv", [["--top-k", "2.5"], ["--bogus"], ["--prompt", " "], ["--config", "/no/such.toml"]])
def test_every_refusal_has_one_prefix(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--model", "m", "--prompt", "a", *argv], engine_factory=Recorder()) == 2
    err = capsys.readouterr().err
    assert err.startswith("logitscope: ") and not err.startswith("logitscope: logitscope") and err.count("\n") == 1


def test_the_tokenizers_length_warning_never_follows_our_line(chatml_model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "short-tokenizer"
    shutil.copytree(chatml_model, folder)
    config_file = folder / "tokenizer_config.json"
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "model_max_length": 64}))
    done = subprocess.run([sys.executable, "-m", "tui.headless", "run", "--model", str(folder),
                           "--prompt", "hello the cat " * 300], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={"XDG_CONFIG_HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path),
                               "XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin",
                               "HOME": str(tmp_path)})
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and "over the context" in done.stderr, done.stderr


def test_version_says_which_blas_and_why_not(tmp_path: Path) -> None:
    code = ("import sys\nfrom engine.cpu import blas\n"
            "def missing(path, threads, failures):\n"
            "    failures.append(path + ': libgfortran.so.5: cannot open shared object file')\n"
            "blas._try_load = missing\n"
            "from tui.main import main\nsys.exit(main(['--version']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    name, versions, blas_line = done.stdout.splitlines()
    assert name.startswith("logitscope ") and versions.startswith("mlx ")
    assert blas_line.startswith("BLAS: MLX built-in (OpenBLAS could not be loaded: the GNU Fortran runtime "
                                "libgfortran.so.5 is missing (install it: sudo apt install libgfortran5")
