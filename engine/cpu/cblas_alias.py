"""Give a prefixed OpenBLAS (``scipy_cblas_sgemm``) the plain names MLX binds (``cblas_sgemm``).

Why: the OpenBLAS that pip installs with its own runtime, ``scipy-openblas32``, needs nothing
from the system (no ``libgfortran.so.5``, which a stock Debian lacks), but prefixes every symbol.
``cblas_alias.c`` exports ``cblas_sgemm``, ``cblas_dgemm`` and ``cblas_cgemm`` (all that libmlx
leaves undefined) and calls the prefixed functions. It is compiled once per machine
(``engine.cpu.cbuild``) and opened with ``RTLD_GLOBAL`` before MLX is imported. When the gemv
forwarder (``engine.cpu.gemv_forward``) is loaded before it, MLX's ``cblas_sgemm`` binds there
and only the double and complex products come here.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from engine.cpu import cbuild

SOURCE = Path(__file__).with_name("cblas_alias.c")
FLAGS = ("-O2", "-shared", "-fPIC")
NAMES = ("cblas_sgemm", "cblas_dgemm", "cblas_cgemm")
SYMBOLS = (*NAMES, "logitscope_cblas_alias_init", "logitscope_cblas_alias_target")
RECIPE = cbuild.Recipe(SOURCE, FLAGS, SYMBOLS)


@dataclass(frozen=True)
class Alias:
    """The outcome of `install`: the loaded alias library, or why there is none (one line)."""

    library: ctypes.CDLL | None
    reason: str

    @property
    def active(self) -> bool:
        return self.library is not None


def install(openblas: ctypes.CDLL, prefix: str, folder: Path | None = None) -> Alias:
    """Load the alias globally, pointed at ``openblas``'s ``<prefix>cblas_*gemm``. Never raises.

    Call with `openblas` opened locally, before MLX is imported.
    """
    missing = next((name for name in NAMES if not hasattr(openblas, prefix + name)), None)
    if missing is not None:
        return Alias(None, f"the BLAS has no {prefix}{missing}")
    try:
        library = cbuild.load(RECIPE, folder or cbuild.default_folder(), mode=ctypes.RTLD_GLOBAL)
    except cbuild.StillBuilding as exc:  # MLX binds its BLAS once: the alias can only join at the next start
        return Alias(None, f"{exc} (on from the next start)")
    except OSError as exc:
        return Alias(None, str(exc))
    library.logitscope_cblas_alias_init(*(ctypes.cast(getattr(openblas, prefix + name), ctypes.c_void_p)
                                          for name in NAMES))
    return Alias(library, "on")
