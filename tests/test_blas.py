"""engine.cpu.blas: OpenBLAS preloaded before MLX, numerically identical, and really the one in use.

Each check runs in a fresh interpreter, because whether MLX binds to the fast library is decided
once, when MLX is first imported in a process. Timing is never asserted (shared CI machines);
what is asserted is that the library is mapped and that ``cblas_sgemm`` resolves into it.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cpu import blas

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fast BLAS is Linux-only")

PROBE = """
import ctypes, json, sys
from engine.cpu.blas import enable_fast_blas, forwarded_cblas_path, resolved_cblas_path
info = enable_fast_blas()
import mlx.core as mx
a = mx.random.normal((300, 200), key=mx.random.key(1))
b = mx.random.normal((200, 250), key=mx.random.key(2))
row, column = a[7:8], b[:, 3:4]  # the mat-vec shapes of a decode step: gemm with M = 1 or N = 1
products = [a @ b, row @ b, a @ column, row @ a.T, b.T @ column, row @ column]
flat = [value for p in products for value in p.reshape(-1).tolist()]
maps = open("/proc/self/maps").read()
try:
    count = ctypes.CDLL(None).logitscope_gemv_forward_count
    count.restype = ctypes.c_long
    forwarded = count()
except AttributeError:
    forwarded = None
json.dump({"active": info.active, "reason": info.reason, "path": info.path, "threads": info.threads,
           "mapped": bool(info.path) and info.path in maps, "resolved": resolved_cblas_path(),
           "gemv_forward": info.gemv_forward, "forwarded_to": forwarded_cblas_path(),
           "forwarded_calls": forwarded, "product": flat}, sys.stdout)
"""


def run_probe(code: str = PROBE, **env: str) -> dict:
    """Run ``code`` in a fresh interpreter with extra environment; return its JSON output."""
    full_env = {**os.environ, **env}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def cache_home(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An empty cache folder: the first probe builds the gemv forwarder from source."""
    return str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def fast(cache_home: str) -> dict:
    result = run_probe(LOGITSCOPE_FAST_BLAS="1", XDG_CACHE_HOME=cache_home)
    if not result["active"]:
        pytest.skip(f"no usable OpenBLAS on this machine: {result['reason']}")
    return result


def test_fast_library_is_mapped_and_resolves_cblas(fast: dict) -> None:
    assert fast["mapped"], "the library enable_fast_blas reported is not mapped in the process"
    assert "openblas" in Path(fast["path"]).name.lower()
    assert fast["threads"] and fast["threads"] >= 1
    if fast["gemv_forward"]:  # cblas_sgemm binds to the forwarder, which calls the fast library
        assert Path(fast["resolved"]).name.startswith("gemv_forward-")
        assert fast["forwarded_to"] == fast["path"]
    else:
        assert fast["resolved"] == fast["path"], "cblas_sgemm does not resolve to the fast library"


def test_mat_vecs_are_forwarded_to_gemv(fast: dict) -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here to build the forwarder")
    assert fast["gemv_forward"] and "gemv forwarding on" in fast["reason"]
    assert fast["forwarded_calls"] >= 5  # the five products with a row or a column (maybe more: warm-up)


def test_forwarding_switch_leaves_plain_openblas(fast: dict, cache_home: str) -> None:
    plain = run_probe(LOGITSCOPE_GEMV_FORWARD="0", XDG_CACHE_HOME=cache_home)
    assert plain["active"] and not plain["gemv_forward"]
    assert plain["forwarded_calls"] is None
    if Path(plain["resolved"]).name.startswith("cblas_alias-"):  # a prefixed OpenBLAS (scipy-openblas32)
        assert plain["forwarded_to"] == plain["path"]
    else:
        assert plain["resolved"] == plain["path"]
    assert "gemv forwarding off" in plain["reason"]
    worst = max(abs(x - y) / (abs(y) + 1.0) for x, y in zip(fast["product"], plain["product"]))
    assert worst < 1e-5


def test_no_compiler_still_gives_openblas_where_a_plain_build_can_run(fast: dict, tmp_path: Path) -> None:
    """Without a compiler only an OpenBLAS with plain cblas names can serve (the prefixed one needs
    the compiled alias): cmeel's, when this CPU can run its build; else the status says why not."""
    result = run_probe(CC=str(tmp_path / "no-such-cc"), XDG_CACHE_HOME=str(tmp_path))
    assert "\n" not in result["reason"]
    cmeel = blas._cmeel_paths()
    if cmeel and _runnable(cmeel[0]):
        assert result["active"] and not result["gemv_forward"]
        assert "no C compiler" in result["reason"]
    else:
        assert not result["active"] and "cblas alias" in result["reason"]


def _runnable(path: str) -> bool:
    """Whether this CPU can run the OpenBLAS build at `path` (`blas.unrunnable_build`)."""
    import ctypes

    return blas.why_it_cannot_run(ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)) is None


def test_fast_and_reference_blas_agree(fast: dict) -> None:
    slow = run_probe(LOGITSCOPE_FAST_BLAS="0")
    assert not slow["active"] and not slow["mapped"]
    assert slow["resolved"] is None or "openblas" not in Path(slow["resolved"]).name.lower()
    worst = max(abs(x - y) / (abs(y) + 1.0) for x, y in zip(fast["product"], slow["product"]))
    assert worst < 1e-4


def test_thread_count_follows_environment(fast: dict) -> None:
    result = run_probe(OPENBLAS_NUM_THREADS="1")
    assert result["active"] and result["threads"] == 1


def test_too_late_is_reported_not_hidden() -> None:
    code = ("import json, sys; import mlx.core; from engine.cpu.blas import enable_fast_blas; "
            "i = enable_fast_blas(); json.dump({'active': i.active, 'reason': i.reason}, sys.stdout)")
    result = run_probe(code)
    assert not result["active"]
    assert result["reason"].startswith("too late")


def test_library_with_64_bit_integers_is_refused() -> None:
    """numpy's scipy-openblas64_ takes 64-bit integers (scipy_cblas_sgemm64_): MLX passes 32-bit ones."""
    import numpy

    libs = glob.glob(str(Path(numpy.__file__).parent.parent / "numpy.libs" / "libscipy_openblas*.so"))
    if not libs:
        pytest.skip("this numpy bundles no scipy-openblas")
    code = ("import json, sys; from engine.cpu.blas import _try_load; f = []; "
            f"r = _try_load({libs[0]!r}, 1, f); json.dump({{'loaded': r is not None, 'why': f}}, sys.stdout)")
    result = run_probe(code)
    assert not result["loaded"]
    assert "64-bit-integer" in result["why"][0]


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
    assert "scipy-openblas32" in blas._not_found_reason([])


def test_explicit_thread_count_wins(fast: dict) -> None:
    code = PROBE.replace("enable_fast_blas()", "enable_fast_blas(threads=1)")
    result = run_probe(code, OPENBLAS_NUM_THREADS="2")
    assert result["active"] and result["threads"] == 1


def test_an_openblas_built_for_avx512_only_is_skipped_on_a_cpu_without_it() -> None:
    """cmeel-openblas's wheel is built for SKYLAKEX alone (no DYNAMIC_ARCH): on a CPU without
    AVX-512 (a cloud Zen 4 reporting avx2 but no avx512f) every engine load died of SIGILL."""
    from engine.cpu.blas import unrunnable_build

    avx2_only = frozenset({"sse4_2", "avx", "avx2", "fma", "f16c"})
    skylakex = "OpenBLAS 0.3.31 NO_AFFINITY SKYLAKEX MAX_THREADS=4"
    assert "SKYLAKEX" in (unrunnable_build(skylakex, avx2_only) or "")
    assert unrunnable_build(skylakex, avx2_only | {"avx512f", "avx512bw"}) is None
    assert unrunnable_build("OpenBLAS 0.3.34 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64", avx2_only) is None
    assert unrunnable_build("OpenBLAS 0.3.31 HASWELL MAX_THREADS=4", avx2_only) is None
    assert unrunnable_build(skylakex, frozenset()) is None  # flags unknown (not Linux): trust the library


def test_a_load_with_the_fast_blas_runs_on_this_cpu() -> None:
    """The real thing, in a fresh process: OpenBLAS loaded as the engine loads it, then an sgemm
    of the small size whose AVX-512 kernel crashed (the process used to die of SIGILL)."""
    code = ("import os\n"
            "from engine.cpu.blas import enable_fast_blas\n"
            "info = enable_fast_blas()\n"
            "import mlx.core as mx\n"
            "a = mx.ones((8, 16)); b = mx.ones((16, 8))\n"
            "print(info.active, float((a @ b).sum()))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, (result.returncode, result.stderr[-1500:])
    assert result.stdout.split()[-1] == "1024.0"
