"""The CPU speed layer: it exists only because MLX's Linux CPU build is slow, and it never changes
a result (every piece is tested against plain mlx-lm in float32).

The engine enters it through `install` alone, once, on the engine thread before MLX is imported,
and only when MLX runs on the CPU (`engine.local.backend.speed_layer` decides; on Metal or CUDA nothing
here is imported). `install` chooses from the switches what to set up and returns a `CpuLayer`,
the one object the engine then talks to. This package imports nothing from the engine proper.

What lives here, by job:
- BLAS: `blas` (OpenBLAS under MLX), `gemv_forward` (+ `.c`: mat-vecs to gemv), `cbuild` (builds
  the C helpers), `switches` (the environment's on/off variables);
- prompt layers: `attention`, `rope`, `norms`, `fastmath`, `native` (+ `.c`), `routing` (which
  installs them per thread, each behind a `handles` predicate that falls back to mlx-lm's code);
- quantized weights: `unpacked` (4-bit layers unpacked for prompts, and kept for decoding where
  `denseplan` measures that a float32 copy pays, by `densechoice`'s rule), `parallel` (two-stream decode).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from engine.cpu.densechoice import DenseChoice
    from engine.cpu.denseplan import Probe


@dataclass(frozen=True)
class CpuSwitches:
    """What the user allowed (config and command line); the environment's switches apply too."""

    fast_blas: bool = True  # OpenBLAS under MLX (`blas`)
    fast_layers: bool = True  # prompt attention and SwiGLU, fused RoPE and RMSNorm (`routing`)


class CpuLayer:
    """The speed layer as the engine sees it, once installed: a status line, the sampler's
    exponential, and what to do to each loaded model."""

    def __init__(self, blas_status: str, blas_active: bool, switches: CpuSwitches, blas_reason: str = "",
                 blas_problem: str = "") -> None:
        self.blas_status = blas_status
        self.blas_reason = blas_reason  # one line: why OpenBLAS is (not) in use
        self.blas_problem = blas_problem  # the reason, when OpenBLAS was wanted and could not be loaded
        self._blas_active = blas_active
        self._switches = switches
        self.dense_choice: DenseChoice | None = None  # the last model's float32 copies (`after_load`)
        self.dense_probe: Probe | None = None  # what `after_load` measures with (None: this machine)

    @property
    def sampler_exp(self) -> Callable[[Any], Any]:
        """MLX's CPU `exp` is scalar code (~2 ms for 152k values, the largest cost of a sampled
        token); `fastmath.exp_nonpositive` is ~4x faster and accurate to ~3e-7."""
        from engine.cpu.fastmath import exp_nonpositive

        return exp_nonpositive

    def tune(self, model: Any) -> None:
        """The measured CPU wins (BENCHMARKS.md); each keeps results exact or within float32 rounding.

        With a fast BLAS, prefill chunks unpack 4-bit layers to float32 and use it (no gain
        without one); which layers keep their float32 copy, for decoding too, is measured after
        the load (`after_load`). Big quantized layers without one split their decode mat-vecs
        over two CPU streams (both cores); prefill attention and SwiGLU, and RoPE and RMSNorm, take
        `routing`'s fast paths on this thread. The first two are no-ops for unquantized models.
        """
        from engine.cpu.parallel import enable_two_stream_decode
        from engine.cpu.routing import install_cpu_routes
        from engine.cpu.unpacked import enable_dequantized_prefill

        if self._blas_active:
            enable_dequantized_prefill(model)
        enable_two_stream_decode(model)
        if self._switches.fast_layers:
            install_cpu_routes()  # for this thread while it lives (later models too)

    def after_load(self, model: Any, should_stop: Callable[[], bool]) -> None:
        """After a load is reported: choose which 4-bit layers keep a float32 copy by measuring
        them (`denseplan`: decode speed per byte of resident memory), then make those copies
        unless a command comes (the first call that needs one makes it then).

        Never fails: an error here leaves layers packed, or their copies to the first call.
        """
        from engine.cpu.denseplan import plan_dense_copies
        from engine.cpu.unpacked import keep_unpacked_weights

        self.dense_choice = None
        try:
            self.dense_choice = plan_dense_copies(model, self.dense_probe) if self._blas_active else None
            keep_unpacked_weights(model, should_stop)
        except Exception:  # noqa: BLE001 - an optimisation; results are the same without it
            pass


def install(*, fast_blas: bool, fast_layers: bool) -> CpuLayer:
    """Set the layer up for this process; call once, on the engine thread, before MLX is imported.

    `fast_blas` and `fast_layers` are what the user allowed (config and command line); the
    environment's switches (`LOGITSCOPE_FAST_BLAS=0`, ...) can still turn a piece off.

    OpenBLAS must be in the process's global scope before MLX binds its BLAS symbols, which is why
    this runs before the first model load rather than at it.
    """
    from engine.cpu.blas import enable_fast_blas

    switches = CpuSwitches(fast_blas=fast_blas, fast_layers=fast_layers)
    info = enable_fast_blas(switches.fast_blas)
    gemv = ", gemv" if info.gemv_forward else ""
    status = f"OpenBLAS ({info.threads} threads{gemv})" if info.active else "MLX built-in"
    return CpuLayer(status, info.active, switches, info.reason, info.reason if info.problem else "")

