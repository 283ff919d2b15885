"""A hanging C compiler costs start-up one wait in all, not one per library (issue #29, item 18):
the gemv forwarder, the BLAS alias and the prompt kernels each used to wait `STARTUP_WAIT_S` for
their own build, so a compiler that never answers cost three waits (6 s). The waits now share
one budget per process; the builds still finish (or are killed) in the background."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.cpu import cbuild, gemv_forward, native

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(cbuild.compiler() is None or not sys.platform.startswith("linux"),
                                reason="needs a C compiler on Linux")


def _sleeping_compiler(tmp_path: Path) -> tuple[Path, Path]:
    """A `cc` that records its pid and sleeps: what a hung compiler wrapper looks like."""
    pids = tmp_path / "pids"
    script = tmp_path / "cc"
    script.write_text(f"#!/bin/sh\necho $$ >> {pids}\nexec sleep 30\n")
    script.chmod(0o755)
    return script, pids


def _kill_all(pids: Path) -> None:
    for line in pids.read_text().split() if pids.exists() else []:
        try:
            os.killpg(int(line), signal.SIGKILL)
        except OSError:
            pass


def test_three_builds_share_one_wait(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cc, pids = _sleeping_compiler(tmp_path)
    monkeypatch.setattr(cbuild, "STARTUP_WAIT_S", 0.6)
    budget = cbuild.WaitBudget()
    started = time.monotonic()
    try:
        for recipe in (native.RECIPE, gemv_forward.RECIPE, native.RECIPE):
            with pytest.raises(cbuild.StillBuilding):
                cbuild.load(recipe, tmp_path / "cache", cc=str(cc), budget=budget)
        spent = time.monotonic() - started
    finally:
        _kill_all(pids)
    assert spent < 1.2, spent  # one wait of 0.6 s, not three (1.8 s)


def test_a_hanging_compiler_costs_start_up_at_most_one_wait(tmp_path: Path) -> None:
    """The whole start path in a fresh process, as the engine thread runs it: the speed layer's
    set-up, then the first model load's kernels."""
    cc, pids = _sleeping_compiler(tmp_path)
    code = ("import time\nfrom engine.cpu import install\n"
            "started = time.monotonic()\n"
            "layer = install(fast_blas=True, fast_layers=True)\n"  # before MLX is imported, as the engine does
            "spent = time.monotonic() - started\n"
            "from engine.cpu import native\n"  # imports MLX: not a wait, so not counted
            "started = time.monotonic()\n"
            "status = native.process_status()\n"
            "print(round(spent + time.monotonic() - started, 2))\nprint(layer.blas_status)\nprint(status)\n")
    env = {**os.environ, "CC": str(cc), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                              env=env)
    finally:
        _kill_all(pids)
    assert done.returncode == 0, done.stderr[-2000:]
    seconds, _blas, status = done.stdout.splitlines()
    assert status.startswith("off: native.c is still building")
    assert float(seconds) < cbuild.STARTUP_WAIT_S + 1.5, done.stdout  # was a wait per build (6.7 s measured)
