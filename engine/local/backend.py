"""Which MLX backend this process runs on, and so whether the CPU speed layer is entered at all.

The decision is made before MLX is imported (the speed layer's OpenBLAS must load first), from
what is installed: MLX on macOS runs on Metal, and on Linux the CUDA build comes as its own
distribution (`mlx-cuda*`); anything else is the CPU build. On a GPU backend the engine runs
mlx-lm's own code, and no module of `engine.cpu` is ever imported.
"""

from __future__ import annotations

import sys
from importlib import metadata
from typing import Any, Callable, Protocol


class SpeedLayer(Protocol):
    """What the engine asks of a speed layer (`engine.cpu.CpuLayer`, or `NoSpeedLayer`)."""

    blas_status: str  # for the status bar: "OpenBLAS (2 threads, gemv)", "MLX built-in"
    blas_reason: str  # one line: why that BLAS
    blas_problem: str  # one line when the fast BLAS was wanted but could not be loaded (what to install), else ""

    @property
    def sampler_exp(self) -> Callable[[Any], Any]:
        """The exponential the sampler uses for non-positive exponents."""
        ...

    def tune(self, model: Any) -> None:
        """Install the speed-ups a freshly loaded model takes (results unchanged)."""
        ...

    def after_load(self, model: Any, should_stop: Callable[[], bool]) -> None:
        """Idle-time work after a load; stops early when `should_stop()` says a command waits."""
        ...


class NoSpeedLayer:
    """A GPU backend's layer: MLX's own kernels, nothing installed."""

    def __init__(self, backend: str) -> None:
        self.blas_status = "MLX built-in"
        self.blas_reason = f"not needed: MLX runs on {backend}"
        self.blas_problem = ""

    @property
    def sampler_exp(self) -> Callable[[Any], Any]:
        import mlx.core as mx

        return mx.exp

    def tune(self, model: Any) -> None:
        """Nothing to do on a GPU."""

    def after_load(self, model: Any, should_stop: Callable[[], bool]) -> None:
        """Nothing to do on a GPU."""


def gpu_backend() -> str | None:
    """"Metal" or "CUDA" when MLX will run on a GPU here, None for the CPU build."""
    if sys.platform == "darwin":
        return "Metal"
    names = (str(dist.metadata["Name"] or "").lower() for dist in metadata.distributions())
    return "CUDA" if any(name.startswith("mlx-cuda") or name.startswith("mlx_cuda") for name in names) else None


def speed_layer(fast_blas: bool, fast_layers: bool) -> SpeedLayer:
    """The layer for this process; call once on the engine thread, before MLX is imported."""
    gpu = gpu_backend()
    if gpu is not None:
        return NoSpeedLayer(gpu)
    from engine.cpu import install

    return install(fast_blas=fast_blas, fast_layers=fast_layers)
