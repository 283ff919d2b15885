"""engine.cpu.gemv_forward: the sgemm that sends mat-vecs to sgemv computes what sgemm computes.

The forwarder is called directly (ctypes, numpy buffers) over every case its C code branches
on: row- and column-major, each transpose, M = 1, N = 1, both, padded leading dimensions, alpha,
beta (including beta = 0 over a NaN-filled output, which BLAS defines as not read) and K = 0.
The reference is a float64 numpy product. Loading it locally here does not touch how MLX binds.
"""

from __future__ import annotations

import ctypes
import itertools
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from engine.cpu import blas, cbuild, gemv_forward

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fast BLAS is Linux-only")

ROW, COL, NO, TRANS = 101, 102, 111, 112


@pytest.fixture(scope="module")
def forwarder(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    found = next((opened for path in blas.candidate_paths() if (opened := _open(path)) is not None), None)
    if found is None:
        pytest.skip("no OpenBLAS that runs on this CPU here")
    if cbuild.compiler() is None:
        pytest.skip("no C compiler here")
    openblas, prefix = found
    library = ctypes.CDLL(str(gemv_forward.build(tmp_path_factory.mktemp("cache"))))
    library.logitscope_gemv_forward_init(ctypes.cast(getattr(openblas, prefix + "cblas_sgemm"), ctypes.c_void_p),
                                         ctypes.cast(getattr(openblas, prefix + "cblas_sgemv"), ctypes.c_void_p))
    return library


def _open(path: str) -> tuple[ctypes.CDLL, str] | None:
    """The library at `path` and its cblas names' prefix, when it has sgemm and sgemv and this CPU
    can run its build (cmeel-openblas's SKYLAKEX-only build dies on a CPU without AVX-512)."""
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    except OSError:
        return None
    prefix = next((p for p in ("", "scipy_") if hasattr(lib, p + "cblas_sgemm") and hasattr(lib, p + "cblas_sgemv")),
                  None)
    return None if prefix is None or blas.why_it_cannot_run(lib, prefix) else (lib, prefix)


def _stored(rows: int, cols: int, lead: int, order: int, rng: np.random.Generator) -> np.ndarray:
    """A rows x cols matrix kept in a buffer with leading dimension `lead` (padding = NaN)."""
    shape = (rows, lead) if order == ROW else (cols, lead)
    buffer = np.full(shape, np.nan, dtype=np.float32)
    values = rng.standard_normal((rows, cols)).astype(np.float32)
    if order == ROW:
        buffer[:, :cols] = values
    else:
        buffer[:, :rows] = values.T
    return buffer


def _logical(buffer: np.ndarray, rows: int, cols: int, order: int) -> np.ndarray:
    return (buffer[:, :cols] if order == ROW else buffer[:, :rows].T).astype(np.float64)


def _sgemm(library: ctypes.CDLL, order: int, ta: int, tb: int, m: int, n: int, k: int, alpha: float,
           a: np.ndarray, lda: int, b: np.ndarray, ldb: int, beta: float, c: np.ndarray, ldc: int) -> None:
    pointer = lambda array: array.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    library.cblas_sgemm(order, ta, tb, m, n, k, ctypes.c_float(alpha), pointer(a), lda, pointer(b), ldb,
                        ctypes.c_float(beta), pointer(c), ldc)


SHAPES = [(1, 37, 19), (23, 1, 19), (1, 1, 40), (1, 300, 70), (90, 1, 300), (5, 6, 7)]


@pytest.mark.parametrize("order, trans_a, trans_b", list(itertools.product((ROW, COL), (NO, TRANS), (NO, TRANS))))
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_matches_a_float64_product(forwarder: ctypes.CDLL, order: int, trans_a: int, trans_b: int,
                                   m: int, n: int, k: int) -> None:
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a_rows, a_cols = (m, k) if trans_a == NO else (k, m)
    b_rows, b_cols = (k, n) if trans_b == NO else (n, k)
    pad = 3  # leading dimensions larger than the matrix, as for a slice of a bigger array
    lda = (a_cols if order == ROW else a_rows) + pad
    ldb = (b_cols if order == ROW else b_rows) + pad
    ldc = (n if order == ROW else m) + pad
    a, b = _stored(a_rows, a_cols, lda, order, rng), _stored(b_rows, b_cols, ldb, order, rng)
    op_a, op_b = _logical(a, a_rows, a_cols, order), _logical(b, b_rows, b_cols, order)
    op_a, op_b = (op_a if trans_a == NO else op_a.T), (op_b if trans_b == NO else op_b.T)
    for alpha, beta in ((1.0, 0.0), (0.5, 2.0)):
        c = _stored(m, n, ldc, order, rng)
        start = _logical(c, m, n, order)
        if beta == 0.0:  # BLAS: with beta = 0 the output is written, never read (NaN must not leak)
            c[...] = np.nan
        _sgemm(forwarder, order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
        expected = alpha * (op_a @ op_b) + (beta * start if beta else 0.0)
        got = _logical(c, m, n, order)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_counts_only_the_mat_vecs(forwarder: ctypes.CDLL) -> None:
    count = gemv_forward.forwarded_calls
    a = np.ones((4, 5), np.float32)
    c = np.zeros((4, 4), np.float32)
    before = count(forwarder)
    _sgemm(forwarder, ROW, NO, TRANS, 4, 4, 5, 1.0, a, 5, a, 5, 0.0, c, 4)  # a matrix product: gemm
    assert count(forwarder) == before and (c == 5).all()
    _sgemm(forwarder, ROW, NO, TRANS, 1, 4, 5, 1.0, a, 5, a, 5, 0.0, c, 4)  # one row: gemv
    assert count(forwarder) == before + 1


def test_k_zero_scales_the_output_by_beta(forwarder: ctypes.CDLL) -> None:
    """An empty inner dimension goes to sgemm, which leaves beta * C (no gemv of zero length)."""
    a = np.ones((1, 1), np.float32)
    c = np.full((1, 3), 2.0, np.float32)
    _sgemm(forwarder, ROW, NO, NO, 1, 3, 0, 1.0, a, 1, a, 3, 0.5, c, 3)
    assert c.tolist() == [[1.0, 1.0, 1.0]]


def test_build_is_cached_and_keyed_by_source(tmp_path: Path) -> None:
    if cbuild.compiler() is None:
        pytest.skip("no C compiler here")
    built = gemv_forward.build(tmp_path)
    assert built == gemv_forward.library_path(tmp_path) and built.is_file()
    assert gemv_forward.build(tmp_path, cc="/bin/false") == built  # cached: the compiler is not run again
    assert not list(tmp_path.glob("*.partial"))


def test_build_failures_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(OSError, match="could not build it") as failed:
        gemv_forward.build(tmp_path, cc="/bin/false")
    assert "\n" not in str(failed.value) and not list(tmp_path.iterdir())
    monkeypatch.setenv("CC", str(tmp_path / "missing-cc"))
    with pytest.raises(OSError, match="no C compiler"):
        gemv_forward.build(tmp_path)


def test_switch_and_missing_gemv_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    only_gemm = SimpleNamespace(cblas_sgemm=None)  # a BLAS without cblas_sgemv
    monkeypatch.setenv(gemv_forward.ENV_SWITCH, "off")
    assert gemv_forward.install(only_gemm).reason == "off (LOGITSCOPE_GEMV_FORWARD=0)"  # type: ignore[arg-type]
    monkeypatch.delenv(gemv_forward.ENV_SWITCH)
    without_gemv = gemv_forward.install(only_gemm)  # type: ignore[arg-type]
    assert not without_gemv.active and "no cblas_sgemv" in without_gemv.reason
