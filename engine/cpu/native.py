"""Vectorized C for the elementwise parts of a prefill: SwiGLU and the attention softmax.

Why: MLX's Linux CPU wheel computes elementwise work one value at a time, and its compiled
kernels are built without vector instructions. Even with `engine.cpu.fastmath`'s library-free
exponential, a 128-token prompt of a 30M llama spent ~1.2 ms per layer in SwiGLU (three passes
split by the float-to-bits views) and most of its attention time in the softmax. ``native.c``
does the same maths in one vectorized loop each: SwiGLU 1.16 -> 0.17 ms there (docs/benchmarks-history.md).

How: the C file is compiled once per machine and verified before every load (`engine.cpu.cbuild`).
A call evaluates its inputs (MLX is lazy), hands their buffers to C without copying, and wraps the
result in a new MLX array. That breaks the lazy graph once per call, which only pays on
prefill-sized inputs: `engine.cpu.routing` sends only those here. float32 only (the CPU compute dtype);
anything else, no compiler, or ``LOGITSCOPE_NATIVE_KERNELS=0`` keeps `engine.cpu.fastmath`'s MLX
versions.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import mlx.core as mx
import numpy as np

from engine.cpu import cbuild, switches

ENV_SWITCH = "LOGITSCOPE_NATIVE_KERNELS"
SOURCE = Path(__file__).with_name("native.c")
FLAGS = ("-O3", "-shared", "-fPIC", "-fopenmp-simd")
RECIPE = cbuild.Recipe(SOURCE, FLAGS, ("logitscope_swiglu_f32", "logitscope_softmax_rows_f32"))

# Below this many values a SwiGLU call stays in MLX's graph: the graph break cost more than the C
# loop saved at 2-8 rows (measured: 4,608 values 0.54 vs 0.49 ms with the matmuls around it;
# 18,432 values 0.68 vs 0.73 ms). The attention softmax wins at every size measured.
SWIGLU_MIN_VALUES = 16_384

_FLOATS = ctypes.c_void_p
_SIZE = ctypes.c_int64


@dataclass(frozen=True)
class NativeKernels:
    """The loaded library; each method takes and returns MLX arrays (float32)."""

    library: ctypes.CDLL

    def __post_init__(self) -> None:
        self.library.logitscope_swiglu_f32.argtypes = [_FLOATS, _FLOATS, _FLOATS, _SIZE]
        self.library.logitscope_swiglu_f32.restype = None
        self.library.logitscope_softmax_rows_f32.argtypes = [_FLOATS, _SIZE, _SIZE, _SIZE, _SIZE]
        self.library.logitscope_softmax_rows_f32.restype = None

    def swiglu(self, gate: mx.array, x: mx.array) -> mx.array:
        """``silu(gate) * x`` for float32 arrays of one shape (evaluates them)."""
        mx.eval(gate, x)
        g, v = _host(gate), _host(x)
        out = np.empty(g.shape, dtype=np.float32)
        self.library.logitscope_swiglu_f32(g.ctypes.data, v.ctypes.data, out.ctypes.data, out.size)
        return mx.array(out)

    def softmax_rows_(self, scores: mx.array, first_visible: int = -1, period: int = 1) -> mx.array:
        """Softmax over the last axis of float32 `scores`, *in place*; returns `scores`.

        Only for an array the caller made and no one else holds (its buffer is overwritten
        after evaluation). Causal: with ``first_visible >= 0``, row r (counting over all leading
        axes) sees the first ``first_visible + r % period + 1`` columns and gets 0 elsewhere.
        """
        mx.eval(scores)
        rows = _writable(scores)
        cols = scores.shape[-1]
        self.library.logitscope_softmax_rows_f32(rows.ctypes.data, rows.size // max(cols, 1), cols,
                                                 first_visible, period)
        return scores


def _host(array: mx.array) -> np.ndarray:
    """An evaluated float32 array's memory as numpy: no copy when contiguous (MLX shares it)."""
    return np.ascontiguousarray(np.asarray(memoryview(array)), dtype=np.float32)  # type: ignore[arg-type]


def _writable(array: mx.array) -> np.ndarray:
    """The array's own buffer; it must be row-contiguous, else writing would miss it."""
    view = np.asarray(memoryview(array))  # type: ignore[arg-type]  # MLX arrays are buffers
    if not (view.flags.c_contiguous and view.flags.writeable and view.dtype == np.float32):
        raise ValueError("native kernels write only contiguous float32 arrays in place")
    return view


def load(folder: Path | None = None) -> tuple[NativeKernels | None, str]:
    """(the kernels, "on") or (None, "off: <one-line reason>"). Never raises."""
    if switches.switched_off(ENV_SWITCH):
        return None, f"off ({ENV_SWITCH}=0)"
    try:
        return NativeKernels(cbuild.load(RECIPE, folder or cbuild.default_folder())), "on"
    except cbuild.StillBuilding as exc:
        return None, f"off: {exc} (on from the next model load)"
    except OSError as exc:  # no compiler, a failed build, a bad cache folder
        return None, f"off: {exc}"


class _ProcessKernels:
    """This process's kernels: loaded once, and again at a later call only if the first found the
    build still running (a slow compiler does not keep them off for the process's life)."""

    def __init__(self) -> None:
        self.result: tuple[NativeKernels | None, str] | None = None

    def get(self) -> tuple[NativeKernels | None, str]:
        """The kernels and their status, loading them now if nothing has (or the build just ended)."""
        if self.result is None or (self.result[1].endswith("(on from the next model load)") and cbuild.verified(
                cbuild.library_path(SOURCE, FLAGS, cbuild.default_folder()))):
            self.result = load()
        return self.result


@functools.cache
def _process() -> _ProcessKernels:
    return _ProcessKernels()


def process_kernels() -> NativeKernels | None:
    """The kernels for this process, built into the user's cache on first use (then reused)."""
    return _process().get()[0]


def process_status() -> str:
    """"on", or "off: <why>", for this process's kernels (loading them if nothing has yet)."""
    return _process().get()[1]


def swiglu_with(kernels: NativeKernels | None, fallback: Callable[[mx.array, mx.array], mx.array]
                ) -> Callable[[mx.array, mx.array], mx.array]:
    """The SwiGLU a route uses: the kernels for big enough float32 inputs when loaded, else `fallback`."""
    if kernels is None:
        return fallback

    def swiglu(gate: mx.array, x: mx.array) -> mx.array:
        if gate.dtype == mx.float32 and x.dtype == mx.float32 and gate.size >= SWIGLU_MIN_VALUES:
            return kernels.swiglu(gate, x)
        return fallback(gate, x)

    return swiglu
