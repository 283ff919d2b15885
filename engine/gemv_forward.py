"""Send MLX's matrix-vector products to OpenBLAS's gemv instead of its gemm.

Why: MLX's CPU matmul calls ``cblas_sgemm`` for every shape, and a decode step is all
matrix-vector products (one row of activations times each weight matrix; the output head is the
biggest). OpenBLAS's x86 builds push those through the full gemm driver, which first packs the
whole weight matrix: 3.6x slower than ``cblas_sgemv`` on a 32,000 x 384 output head with two
threads, 5.4x with one (BENCHMARKS.md). ``gemv_forward.c`` is a ``cblas_sgemm`` that hands M = 1
and N = 1 calls to ``cblas_sgemv`` and everything else to OpenBLAS's ``cblas_sgemm``; the results
are the same products, summed in a different order (float32 rounding).

How it gets in: the C file is compiled once per machine with the system's C compiler (the same
one MLX's own ``mx.compile`` needs on a CPU) into the user's cache folder, then opened with
``RTLD_GLOBAL`` *before* OpenBLAS is made global, so a global lookup of ``cblas_sgemm`` (which is
how ``libmlx`` binds it) finds this one first. No compiler means no forwarding, never a failure.
Off switch: ``LOGITSCOPE_GEMV_FORWARD=0``.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from engine import switches
from engine.config import cache_dir

ENV_SWITCH = "LOGITSCOPE_GEMV_FORWARD"
SOURCE = Path(__file__).with_name("gemv_forward.c")
FLAGS = ("-O2", "-shared", "-fPIC")
COMPILE_TIMEOUT_S = 60


@dataclass(frozen=True)
class Forwarding:
    """The outcome of `install`: the loaded forwarder, or why there is none (one line)."""

    library: ctypes.CDLL | None
    reason: str

    @property
    def active(self) -> bool:
        return self.library is not None


def compiler(env: Mapping[str, str] | None = None) -> str | None:
    """``$CC`` if set, else the first of cc, gcc, clang on the PATH."""
    env = os.environ if env is None else env
    chosen = env.get("CC", "").strip()
    if chosen:
        return shutil.which(chosen) or (chosen if Path(chosen).is_file() else None)
    return next((found for name in ("cc", "gcc", "clang") if (found := shutil.which(name))), None)


def library_path(folder: Path) -> Path:
    """Where the build of this exact source, these flags and this machine type is cached."""
    digest = hashlib.sha256(SOURCE.read_bytes() + " ".join(FLAGS).encode()).hexdigest()[:16]
    return folder / f"gemv_forward-{digest}-{platform.machine()}.so"


def build(folder: Path | None = None, cc: str | None = None) -> Path:
    """The compiled forwarder, built now unless a cached build exists. Raises OSError (one line)."""
    target = library_path(folder or cache_dir())
    if target.is_file():
        return target
    cc = cc or compiler()
    if cc is None:
        raise OSError("no C compiler found (set CC, or install gcc)")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=target.parent, suffix=".so.partial")
    os.close(handle)
    try:
        done = subprocess.run([cc, *FLAGS, "-o", partial, str(SOURCE)], capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT_S)
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no output"])[0]
            raise OSError(f"{Path(cc).name} could not build it: {first}")
        os.replace(partial, target)  # atomic: a concurrent process sees all of it or none
    except subprocess.TimeoutExpired as exc:
        raise OSError(f"{Path(cc).name} took over {COMPILE_TIMEOUT_S} s") from exc
    finally:
        Path(partial).unlink(missing_ok=True)
    return target


def install(openblas: ctypes.CDLL, folder: Path | None = None) -> Forwarding:
    """Load the forwarder globally and point it at ``openblas``'s own sgemm and sgemv.

    Call after opening OpenBLAS *locally* and before opening it globally (see the module
    docstring), and before MLX is imported. Never raises.
    """
    if switches.switched_off(ENV_SWITCH):
        return Forwarding(None, f"off ({ENV_SWITCH}=0)")
    if not hasattr(openblas, "cblas_sgemv"):
        return Forwarding(None, "off: the BLAS has no cblas_sgemv")
    try:
        library = ctypes.CDLL(str(build(folder)), mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        return Forwarding(None, f"off: {exc}")
    library.logitscope_gemv_forward_init(ctypes.cast(openblas.cblas_sgemm, ctypes.c_void_p),
                                         ctypes.cast(openblas.cblas_sgemv, ctypes.c_void_p))
    return Forwarding(library, "on")


def forwarded_calls(library: ctypes.CDLL) -> int:
    """How many sgemm calls the forwarder has sent to sgemv so far (for tests and probes)."""
    library.logitscope_gemv_forward_count.restype = ctypes.c_long
    return int(library.logitscope_gemv_forward_count())
