"""engine.cpu.blas on a stock machine: the OpenBLAS that pip brings works without the system's
GNU Fortran runtime (Debian's ``libgfortran5`` is not installed by default).

``scipy-openblas32`` carries no Fortran dependency but prefixes its symbols (``scipy_cblas_sgemm``),
so MLX, which binds plain ``cblas_sgemm``, reaches it through ``engine/cpu/cblas_alias.c``. The
machine's libgfortran is hidden per process (a private mount namespace with /dev/null bound over
it), never uninstalled. Each probe is a fresh interpreter: MLX binds its BLAS once per process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_blas import PROBE

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fast BLAS is Linux-only")


def _gfortran_files() -> list[str]:
    """Every libgfortran.so.5 the dynamic linker could find (its cache plus the usual folders)."""
    listed = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout.splitlines()
    found = [line.split("=>")[-1].strip() for line in listed if "libgfortran.so.5" in line]
    for folder in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                   "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
        candidate = Path(folder, "libgfortran.so.5")
        if candidate.exists():
            found.append(str(candidate))
    return sorted(set(found))


def _can_hide() -> str | None:
    """None when this process may hide a file per process; else why not (the skip reason)."""
    if shutil.which("unshare") is None:
        return "no unshare(1) here to hide libgfortran per process"
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        return "unshare -m is not permitted here (needs root or user namespaces)"
    return None


def probe_without_gfortran(**env: str) -> dict:
    """Run the BLAS probe in a fresh interpreter that cannot open any libgfortran.so.5."""
    binds = " && ".join(f"mount --bind /dev/null {path}" for path in _gfortran_files()) or "true"
    command = f'{binds} && exec "$0" -c "$1"'
    done = subprocess.run(["unshare", "-m", "sh", "-c", command, sys.executable, PROBE], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def probe(**env: str) -> dict:
    """The same probe with the machine as it is."""
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def cache_home(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An empty cache: the first probe builds the alias and the gemv forwarder from source."""
    return str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def reference() -> dict:
    """The same products on MLX's own (reference) BLAS."""
    return probe(LOGITSCOPE_FAST_BLAS="0")


def _worst(result: dict, reference: dict) -> float:
    return max(abs(x - y) / (abs(y) + 1.0) for x, y in zip(result["product"], reference["product"]))


def _need_compiler() -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here to build the cblas alias")


def test_fast_blas_works_without_libgfortran(cache_home: str, reference: dict) -> None:
    reason = _can_hide()
    if reason:
        pytest.skip(reason)
    _need_compiler()
    result = probe_without_gfortran(XDG_CACHE_HOME=cache_home, LOGITSCOPE_FAST_BLAS="1")
    assert result["active"], result["reason"]
    assert "scipy_openblas" in Path(result["path"]).name and result["mapped"]
    assert result["gemv_forward"] and result["forwarded_calls"] >= 5
    assert result["forwarded_to"] == result["path"]
    assert _worst(result, reference) < 1e-4


def test_alias_alone_serves_every_gemm_without_libgfortran(cache_home: str, reference: dict) -> None:
    """With the gemv forwarder off, MLX's cblas_sgemm binds to the alias, which calls the fast one."""
    reason = _can_hide()
    if reason:
        pytest.skip(reason)
    _need_compiler()
    result = probe_without_gfortran(XDG_CACHE_HOME=cache_home, LOGITSCOPE_GEMV_FORWARD="0")
    assert result["active"] and not result["gemv_forward"], result["reason"]
    assert Path(result["resolved"]).name.startswith("cblas_alias-")
    assert _worst(result, reference) < 1e-4


def test_bundled_library_numerics_match_reference(cache_home: str, reference: dict) -> None:
    """The PyPI OpenBLAS chosen explicitly, libgfortran present or not: same products as MLX's own."""
    _need_compiler()
    import scipy_openblas32

    path = str(Path(scipy_openblas32.get_lib_dir(), "libscipy_openblas.so"))
    for forward in ("1", "0"):
        result = probe(XDG_CACHE_HOME=cache_home, LOGITSCOPE_BLAS_LIB=path, LOGITSCOPE_GEMV_FORWARD=forward)
        assert result["active"] and result["path"] == os.path.realpath(path), result["reason"]
        assert _worst(result, reference) < 1e-4


def test_prefixed_library_without_compiler_says_so(tmp_path: Path) -> None:
    """No compiler and no libgfortran: one line that names the missing compiler; MLX keeps its BLAS."""
    reason = _can_hide()
    if reason:
        pytest.skip(reason)
    result = probe_without_gfortran(XDG_CACHE_HOME=str(tmp_path), CC=str(tmp_path / "no-such-cc"))
    if result["active"]:  # a system OpenBLAS without the Fortran runtime took over: fine, not this path
        assert "scipy_openblas" not in Path(result["path"]).name
        pytest.skip(f"another OpenBLAS serves MLX here: {result['path']}")
    assert "C compiler" in result["reason"] and "\n" not in result["reason"]
