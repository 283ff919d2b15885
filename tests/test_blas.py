"""engine.blas: OpenBLAS preloaded before MLX, numerically identical, and really the one in use.

Each check runs in a fresh interpreter, because whether MLX binds to the fast library is decided
once, when MLX is first imported in a process. Timing is never asserted (shared CI machines);
what is asserted is that the library is mapped and that ``cblas_sgemm`` resolves into it.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import blas

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fast BLAS is Linux-only")

PROBE = """
import json, sys
from engine.blas import enable_fast_blas, resolved_cblas_path
info = enable_fast_blas()
import mlx.core as mx
a = mx.random.normal((300, 200), key=mx.random.key(1))
b = mx.random.normal((200, 250), key=mx.random.key(2))
product = (a @ b).tolist()
maps = open("/proc/self/maps").read()
json.dump({"active": info.active, "reason": info.reason, "path": info.path, "threads": info.threads,
           "mapped": bool(info.path) and info.path in maps, "resolved": resolved_cblas_path(),
           "product": product}, sys.stdout)
"""


def run_probe(code: str = PROBE, **env: str) -> dict:
    """Run ``code`` in a fresh interpreter with extra environment; return its JSON output."""
    full_env = {**os.environ, **env}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def fast() -> dict:
    result = run_probe(LOGITSCOPE_FAST_BLAS="1")
    if not result["active"]:
        pytest.skip(f"no usable OpenBLAS on this machine: {result['reason']}")
    return result


def test_fast_library_is_mapped_and_resolves_cblas(fast: dict) -> None:
    assert fast["mapped"], "the library enable_fast_blas reported is not mapped in the process"
    assert fast["resolved"] == fast["path"], "cblas_sgemm does not resolve to the fast library"
    assert "openblas" in Path(fast["path"]).name.lower()
    assert fast["threads"] and fast["threads"] >= 1


def test_fast_and_reference_blas_agree(fast: dict) -> None:
    slow = run_probe(LOGITSCOPE_FAST_BLAS="0")
    assert not slow["active"] and not slow["mapped"]
    assert slow["resolved"] is None or "openblas" not in Path(slow["resolved"]).name.lower()
    worst = max(abs(x - y) / (abs(y) + 1.0) for fr, sr in zip(fast["product"], slow["product"])
                for x, y in zip(fr, sr))
    assert worst < 1e-4


def test_thread_count_follows_environment(fast: dict) -> None:
    result = run_probe(OPENBLAS_NUM_THREADS="1")
    assert result["active"] and result["threads"] == 1


def test_too_late_is_reported_not_hidden() -> None:
    code = ("import json, sys; import mlx.core; from engine.blas import enable_fast_blas; "
            "i = enable_fast_blas(); json.dump({'active': i.active, 'reason': i.reason}, sys.stdout)")
    result = run_probe(code)
    assert not result["active"]
    assert result["reason"].startswith("too late")


def test_library_with_prefixed_symbols_is_refused() -> None:
    """numpy's scipy-openblas renames cblas_sgemm, so MLX could never bind to it."""
    import numpy

    libs = glob.glob(str(Path(numpy.__file__).parent.parent / "numpy.libs" / "libscipy_openblas*.so"))
    if not libs:
        pytest.skip("this numpy bundles no scipy-openblas")
    code = ("import json, sys; from engine.blas import _try_load; f = []; "
            f"r = _try_load({libs[0]!r}, 1, f); json.dump({{'loaded': r is not None, 'why': f}}, sys.stdout)")
    result = run_probe(code)
    assert not result["loaded"]
    assert "prefixed" in result["why"][0]


def test_off_switch_and_macos_are_no_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(blas.ENV_SWITCH, "off")
    assert not blas.enable_fast_blas().active
    monkeypatch.delenv(blas.ENV_SWITCH)
    assert not blas.enable_fast_blas(enabled=False).active
    monkeypatch.setattr(sys, "platform", "darwin")
    info = blas.enable_fast_blas()
    assert not info.active and "macOS" in info.reason


def test_missing_library_gives_one_line_hint() -> None:
    reason = blas._not_found_reason(["/x/libopenblas.so.0: libgfortran.so.5: cannot open shared object file"])
    assert "libgfortran5" in reason and "\n" not in reason
    assert "cmeel-openblas" in blas._not_found_reason([])


def test_explicit_thread_count_wins(fast: dict) -> None:
    code = PROBE.replace("enable_fast_blas()", "enable_fast_blas(threads=1)")
    result = run_probe(code, OPENBLAS_NUM_THREADS="2")
    assert result["active"] and result["threads"] == 1
