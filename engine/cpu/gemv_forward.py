"""Send MLX's matrix-vector products to OpenBLAS's gemv instead of its gemm.

Why: MLX's CPU matmul calls ``cblas_sgemm`` for every shape, and a decode step is all
matrix-vector products (one row of activations times each weight matrix; the output head is the
biggest). OpenBLAS's x86 builds push those through the full gemm driver, which first packs the
whole weight matrix: 3.6x slower than ``cblas_sgemv`` on a 32,000 x 384 output head with two
threads, 5.4x with one (docs/benchmarks-history.md). ``gemv_forward.c`` is a ``cblas_sgemm`` that hands M = 1
and N = 1 calls to ``cblas_sgemv`` and everything else to OpenBLAS's ``cblas_sgemm``; the results
are the same products, summed in a different order (float32 rounding).

How it gets in: the C file is compiled once per machine (``engine.cpu.cbuild``), then opened with
``RTLD_GLOBAL`` *before* OpenBLAS is made global, so a global lookup of ``cblas_sgemm`` (which is
how ``libmlx`` binds it) finds this one first. No compiler means no forwarding, never a failure.
Off switch: ``LOGITSCOPE_GEMV_FORWARD=0``.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from engine.cpu import cbuild, switches

ENV_SWITCH = "LOGITSCOPE_GEMV_FORWARD"
SOURCE = Path(__file__).with_name("gemv_forward.c")
FLAGS = ("-O2", "-shared", "-fPIC")
SYMBOLS = ("cblas_sgemm", "logitscope_gemv_forward_init", "logitscope_gemv_forward_count",
           "logitscope_gemv_forward_target")
RECIPE = cbuild.Recipe(SOURCE, FLAGS, SYMBOLS)


@dataclass(frozen=True)
class Forwarding:
    """The outcome of `install`: the loaded forwarder, or why there is none (one line)."""

    library: ctypes.CDLL | None
    reason: str

    @property
    def active(self) -> bool:
        return self.library is not None


def library_path(folder: Path) -> Path:
    """Where the build of this exact source, these flags and this machine type is cached."""
    return cbuild.library_path(SOURCE, FLAGS, folder)


def build(folder: Path | None = None, cc: str | None = None) -> Path:
    """The compiled forwarder, built now unless a cached build exists. Raises OSError (one line)."""
    return cbuild.build(SOURCE, FLAGS, folder or cbuild.default_folder(), cc)


def install(openblas: ctypes.CDLL, folder: Path | None = None, prefix: str = "") -> Forwarding:
    """Load the forwarder globally and point it at ``openblas``'s own sgemm and sgemv.

    Call after opening OpenBLAS *locally* and before opening it globally (see the module
    docstring), and before MLX is imported. `prefix` is the one its symbols carry, if any
    (``scipy_`` for scipy-openblas32, see ``engine.cpu.cblas_alias``). Never raises.
    """
    if switches.switched_off(ENV_SWITCH):
        return Forwarding(None, f"off ({ENV_SWITCH}=0)")
    if not hasattr(openblas, prefix + "cblas_sgemv"):
        return Forwarding(None, "off: the BLAS has no cblas_sgemv")
    try:  # verified, and checked for every symbol while still local: a stale one never goes global
        library = cbuild.load(RECIPE, folder or cbuild.default_folder(), mode=ctypes.RTLD_GLOBAL)
    except cbuild.StillBuilding as exc:  # MLX binds its BLAS once: the forwarder can only join at the next start
        return Forwarding(None, f"off: {exc} (on from the next start)")
    except OSError as exc:
        return Forwarding(None, f"off: {exc}")
    library.logitscope_gemv_forward_init(ctypes.cast(getattr(openblas, prefix + "cblas_sgemm"), ctypes.c_void_p),
                                         ctypes.cast(getattr(openblas, prefix + "cblas_sgemv"), ctypes.c_void_p))
    return Forwarding(library, "on")


def forwarded_calls(library: ctypes.CDLL) -> int:
    """How many sgemm calls the forwarder has sent to sgemv so far (for tests and probes)."""
    library.logitscope_gemv_forward_count.restype = ctypes.c_long
    return int(library.logitscope_gemv_forward_count())
