"""Which MLX backend this process runs on, and so whether the CPU speed layer is entered at all.

The decision is made before MLX is imported (the speed layer's OpenBLAS must load first), from
what is installed: MLX on macOS runs on Metal, and on Linux the CUDA build comes as its own
distribution (`mlx-cuda*`); anything else is the CPU build. On a GPU backend the engine runs
mlx-lm's own code, and no module of `engine.cpu` is ever imported.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Protocol, Sequence


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


def gpu_backend(paths: Sequence[str] | None = None) -> str | None:
    """"Metal" or "CUDA" when MLX will run on a GPU here, None for the CPU build."""
    if sys.platform == "darwin":
        return "Metal"
    return "CUDA" if cuda_build_installed(sys.path if paths is None else paths) else None


def cuda_build_installed(paths: Sequence[str]) -> bool:
    """Whether a distribution of MLX's CUDA build (``mlx-cuda``, ``mlx-cuda-12``, ...) is on
    `paths`, by the names of the metadata folders in their listings (``mlx_cuda-0.29.dist-info``).

    Why not `importlib.metadata.distributions()`: it opens every installed distribution's metadata
    to read its name, 50 ms of the engine's start on every launch (#30.8); a folder's name is
    its distribution's normalised name, which is all this needs."""
    for entry in paths:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # not a folder (a zip), or gone
            continue
        for name in names:
            low = name.lower().replace("-", "_")
            if low.startswith("mlx_cuda") and name.endswith((".dist-info", ".egg-info")):
                return True
    return False


def speed_layer(fast_blas: bool, fast_layers: bool) -> SpeedLayer:
    """The layer for this process; call once on the engine thread, before MLX is imported."""
    gpu = gpu_backend()
    if gpu is not None:
        return NoSpeedLayer(gpu)
    from engine.cpu import install

    return install(fast_blas=fast_blas, fast_layers=fast_layers)
