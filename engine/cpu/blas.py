"""Swap MLX's slow reference BLAS for OpenBLAS on Linux, before MLX is imported.

Why: the Linux CPU wheel of MLX links a reference (netlib) BLAS, which multiplies at a few
GFLOP/s: a 1024x1024 float32 matmul takes ~450 ms where OpenBLAS takes ~8 ms. ``libmlx`` leaves
``cblas_sgemm`` and friends undefined and the dynamic linker binds them when MLX is loaded,
searching the process's global scope first. So opening an OpenBLAS library with ``RTLD_GLOBAL``
*before* ``import mlx`` makes every MLX matmul run through OpenBLAS, with no change to MLX.

Where the library comes from, in order:

1. ``LOGITSCOPE_BLAS_LIB``: an explicit path, for unusual installs.
2. the ``cmeel-openblas`` wheel (``site-packages/cmeel.prefix/lib/libopenblas.so.0``); it needs
   the GNU Fortran runtime ``libgfortran.so.5`` from the system (Debian: ``libgfortran5``), which
   a stock Debian lacks: then it is skipped. Where it loads it comes first (the library earlier
   releases used; measured as fast as the next one).
3. the ``scipy-openblas32`` wheel (also a dependency of logitscope on Linux): it brings everything
   it needs, so it works on a stock machine. Its symbols carry a prefix (``scipy_cblas_sgemm``), so
   MLX reaches it through ``engine.cpu.cblas_alias``, a small forwarder compiled once per machine.
4. the system's OpenBLAS (Debian/Ubuntu ``libopenblas0-pthread``, Fedora ``openblas``).

numpy's bundled ``scipy-openblas64_`` is no use: it takes 64-bit integers (ILP64) where MLX
passes 32-bit ones; a candidate must export ``cblas_sgemm`` plainly or as ``scipy_cblas_sgemm``.

With it, MLX's matrix-vector products (every decode step) are sent to OpenBLAS's gemv rather than
its gemm, which is several times slower for them: see ``engine.cpu.gemv_forward``.

Off switch: ``LOGITSCOPE_FAST_BLAS=0`` (or ``enable_fast_blas(enabled=False)``). On macOS this is
a no-op: MLX uses Accelerate there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from engine.cpu import cblas_alias, gemv_forward, switches

ENV_SWITCH = "LOGITSCOPE_FAST_BLAS"
ENV_LIBRARY = "LOGITSCOPE_BLAS_LIB"
_SYSTEM_DIRS = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
)
_SYSTEM_NAMES = ("libopenblas.so.0", "libopenblasp.so.0", "libopenblas.so")
_PREFIXES = ("", "scipy_")  # plain, and scipy-openblas32's (reached through engine.cpu.cblas_alias)


@dataclass(frozen=True)
class BlasInfo:
    """What `enable_fast_blas` did, for status lines and logs.

    ``active`` means MLX's ``cblas_sgemm`` resolves to the fast library in this process.
    ``reason`` is one line for the user either way.
    """

    active: bool
    reason: str
    path: str | None = None
    threads: int | None = None
    gemv_forward: bool = False  # MLX's mat-vec products go to cblas_sgemv (engine.cpu.gemv_forward)
    problem: bool = False  # wanted but not in use: ``reason`` says what is missing and how to install it


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def switched_off() -> bool:
    """True when the user turned the fast BLAS off through ``LOGITSCOPE_FAST_BLAS``."""
    return switches.switched_off(ENV_SWITCH)


def default_threads() -> int:
    """The cores this process may run on (affinity-aware, unlike ``os.cpu_count``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def resolved_cblas_path() -> str | None:
    """The file that a global lookup of ``cblas_sgemm`` lands in, or None if none exports it.

    This is the library MLX's undefined ``cblas_sgemm`` binds to, since the global scope is
    searched before ``libmlx``'s own dependencies.
    """
    try:
        return _library_of(_address(ctypes.CDLL(None).cblas_sgemm))
    except (AttributeError, OSError):
        return None


def forwarded_cblas_path() -> str | None:
    """The library doing the work behind a forwarder bound globally (else None): the gemv forwarder
    (``engine.cpu.gemv_forward``: its gemm for matrices, that library's gemv for vectors), else
    the alias of a prefixed OpenBLAS (``engine.cpu.cblas_alias``)."""
    for name in ("logitscope_gemv_forward_target", "logitscope_cblas_alias_target"):
        try:
            target = getattr(ctypes.CDLL(None), name)
        except (AttributeError, OSError):
            continue
        target.restype = ctypes.c_void_p
        return _library_of(target())
    return None


def _address(function: Any) -> int | None:
    """A ctypes function's address in memory."""
    return ctypes.cast(function, ctypes.c_void_p).value


def _library_of(address: int | None) -> str | None:
    """The real path of the shared library that holds the code at `address`."""
    info = _DlInfo()
    if not address or not ctypes.CDLL(None).dladdr(ctypes.c_void_p(address), ctypes.byref(info)) \
            or not info.dli_fname:
        return None
    return os.path.realpath(info.dli_fname.decode())


def candidate_paths() -> list[str]:
    """Libraries worth trying, best first (see the module docstring for the order)."""
    found: list[str] = []
    explicit = os.environ.get(ENV_LIBRARY, "").strip()
    if explicit:
        found.append(explicit)
    found.extend(_cmeel_paths())
    found.extend(_scipy_openblas_paths())
    for directory in _SYSTEM_DIRS:
        found.extend(str(Path(directory, n)) for n in _SYSTEM_NAMES if Path(directory, n).exists())
    by_name = ctypes.util.find_library("openblas")
    if by_name:
        found.append(by_name)
    return list(dict.fromkeys(found))


def _scipy_openblas_paths() -> list[str]:
    """Where the ``scipy-openblas32`` wheel put its library, if it is installed (not imported:
    its ``__init__`` would open the library before we choose how)."""
    try:
        dist = metadata.distribution("scipy-openblas32")
    except metadata.PackageNotFoundError:
        return []
    lib = Path(str(dist.locate_file("scipy_openblas32/lib/libscipy_openblas.so")))
    return [str(lib)] if lib.exists() else []


def _cmeel_paths() -> list[str]:
    """Where the ``cmeel-openblas`` wheel put its library, if it is installed."""
    try:
        dist = metadata.distribution("cmeel-openblas")
    except metadata.PackageNotFoundError:
        return []
    lib = Path(str(dist.locate_file("cmeel.prefix/lib/libopenblas.so.0")))
    return [str(lib)] if lib.exists() else []


def enable_fast_blas(enabled: bool = True, threads: int | None = None) -> BlasInfo:
    """Load OpenBLAS globally so MLX binds its BLAS calls to it. Call before ``import mlx``.

    Threads: ``threads`` if given, else ``OPENBLAS_NUM_THREADS``, else the usable core count.

    Never raises: a missing library or a late call is reported in the returned `BlasInfo`, and
    MLX then simply runs with its own (slow but correct) BLAS.
    """
    if not sys.platform.startswith("linux"):
        return BlasInfo(False, "not needed: MLX uses Apple's Accelerate on macOS")
    if not enabled or switched_off():
        return BlasInfo(False, f"fast BLAS switched off ({ENV_SWITCH}=0 or config)")
    if "mlx.core" in sys.modules:
        return _late_call_info()
    count = threads or _env_threads() or default_threads()
    os.environ["OPENBLAS_NUM_THREADS"] = str(count)  # read by OpenBLAS when it starts its pool
    failures: list[str] = []
    try:
        for path in candidate_paths():
            info = _try_load(path, count, failures)
            if info is not None:
                return info
    except Exception as exc:  # noqa: BLE001 - the promise above: the engine must still start
        return BlasInfo(False, f"fast BLAS set-up failed ({' '.join(str(exc).split())[:200]}); using MLX's slow BLAS",
                        problem=True)
    return BlasInfo(False, _not_found_reason(failures), problem=True)


# OpenBLAS targets whose kernels use AVX-512: a build for one of these alone (no DYNAMIC_ARCH)
# dies of SIGILL on the first small sgemm of a CPU without it.
_AVX512_TARGETS = ("SKYLAKEX", "COOPERLAKE", "SAPPHIRERAPIDS", "ZEN4", "ZEN5")


def unrunnable_build(config: str, flags: frozenset[str]) -> str | None:
    """Why an OpenBLAS build (its ``openblas_get_config()`` line) cannot run on a CPU with these
    instruction-set `flags`, or None when it can (or we cannot tell).

    Why: a DYNAMIC_ARCH build picks kernels the CPU has at load; a build for one target does
    not. cmeel-openblas 0.3.31's Linux wheel is built for SKYLAKEX only, so on a CPU without
    AVX-512 (a cloud AMD EPYC reporting avx2 but no avx512f) every engine load died of SIGILL in
    its small-matrix sgemm kernel. Such a build is skipped and the next library serves MLX.
    """
    words = config.upper().split()
    if "DYNAMIC_ARCH" in words or not flags:
        return None
    target = next((w for w in words if w in _AVX512_TARGETS), None)
    if target is not None and "avx512f" not in flags:
        return f"built for {target} only (AVX-512), which this CPU does not have"
    return None


def why_it_cannot_run(lib: ctypes.CDLL, prefix: str = "") -> str | None:
    """Why this machine cannot run the opened (locally) OpenBLAS `lib` (`unrunnable_build`), or None."""
    return unrunnable_build(_build_config(lib, prefix), _cpu_flags())


def _build_config(lib: ctypes.CDLL, prefix: str) -> str:
    """The library's own description of its build ("OpenBLAS 0.3.31 NO_AFFINITY SKYLAKEX ..."),
    "" when it has none."""
    getter = getattr(lib, f"{prefix}openblas_get_config", None) or getattr(lib, "openblas_get_config", None)
    if getter is None:
        return ""
    getter.restype = ctypes.c_char_p
    getter.argtypes = []
    value = getter()
    return value.decode("ascii", "replace") if isinstance(value, bytes) else ""


def _cpu_flags() -> frozenset[str]:
    """The instruction-set flags Linux reports for this machine's first CPU ({} elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def _late_call_info() -> BlasInfo:
    """MLX is already loaded: report whether an earlier call got there in time."""
    forwarded = forwarded_cblas_path()
    path = forwarded or resolved_cblas_path()
    if path and "openblas" in Path(path).name.lower():
        return BlasInfo(True, f"OpenBLAS already active ({path})", path=path, gemv_forward=forwarded is not None)
    return BlasInfo(False, "too late: mlx was imported before enable_fast_blas(); MLX keeps its slow BLAS")


def _try_load(path: str, threads: int, failures: list[str]) -> BlasInfo | None:
    """Open one candidate for MLX; None (and a note in ``failures``) if it cannot serve MLX.

    It is opened locally first: the gemv forwarder must enter the global scope before it, and
    only once the library is known to load (the forwarder calls into it). A plain library then
    goes global itself; a prefixed one stays local behind ``engine.cpu.cblas_alias``.
    """
    try:
        local = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    except OSError as exc:
        failures.append(f"{path}: {exc}")
        return None
    prefix = next((p for p in _PREFIXES if hasattr(local, p + "cblas_sgemm")), None)
    if prefix is None:
        failures.append(f"{path}: no cblas_sgemm or scipy_cblas_sgemm symbol (a 64-bit-integer or renamed build)")
        return None
    why_not = why_it_cannot_run(local, prefix)
    if why_not is not None:
        failures.append(f"{path}: {why_not}")
        return None
    forwarding = gemv_forward.install(local, prefix=prefix)
    if prefix:
        alias = cblas_alias.install(local, prefix)
        if not alias.active:
            failures.append(f"{path}: its {prefix}cblas_* names need the cblas alias, which is off: {alias.reason}")
            return None
        lib = local
    else:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)  # promotes the open library to the global scope
    actual = _set_threads(lib, threads, prefix)
    real = os.path.realpath(path) if os.path.sep in path else (_library_of(_address(lib.cblas_sgemm)) or path)
    return BlasInfo(True, f"OpenBLAS ({real}, {actual} threads; gemv forwarding {forwarding.reason})",
                    path=real, threads=actual, gemv_forward=forwarding.active)


def _env_threads() -> int | None:
    """A user's ``OPENBLAS_NUM_THREADS``, if it is a positive whole number."""
    raw = os.environ.get("OPENBLAS_NUM_THREADS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def _set_threads(lib: ctypes.CDLL, threads: int, prefix: str = "") -> int:
    """Apply the thread count (also after start-up, in case the pool already existed)."""
    if hasattr(lib, prefix + "openblas_set_num_threads"):
        getattr(lib, prefix + "openblas_set_num_threads")(ctypes.c_int(threads))
    if hasattr(lib, prefix + "openblas_get_num_threads"):
        return int(getattr(lib, prefix + "openblas_get_num_threads")())
    return threads


def _not_found_reason(failures: list[str]) -> str:
    """One line that tells the user what to install."""
    alias = next((f for f in failures if "cblas alias" in f), None)
    if alias is not None:  # the wheel logitscope brings is there: what it lacks is what to fix
        return f"OpenBLAS not usable ({' '.join(alias.split())[:240]}); using MLX's slow BLAS"
    if any("libgfortran" in f for f in failures):
        return ("OpenBLAS could not be loaded: the GNU Fortran runtime libgfortran.so.5 is missing "
                "(install it: sudo apt install libgfortran5, or dnf install libgfortran); using MLX's slow BLAS")
    if failures:
        return f"no usable OpenBLAS ({' '.join(failures[0].split())[:200]}); using MLX's slow BLAS"
    return ("no OpenBLAS found (install it: pip install scipy-openblas32, or sudo apt install libopenblas0-pthread); "
            "using MLX's slow BLAS")
