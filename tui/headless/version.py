"""``logitscope --version``: what is installed, and which BLAS MLX's CPU matmuls would use and why.

Why the BLAS line: on a Linux CPU the difference between OpenBLAS and MLX's built-in BLAS is
tens of times in prompt speed, and the usual cause of the slow one is a missing system library
(``libgfortran5``); this is where a user (or a bug report) finds that out without loading a model.
It sets the BLAS up exactly as the engine thread does, in this short-lived process.
"""

from __future__ import annotations

import sys
from importlib import metadata
from typing import TextIO


def _installed(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def version_lines() -> list[str]:
    """The lines ``--version`` prints: logitscope, MLX and mlx-lm, then the backend and its BLAS."""
    from engine.factory import speed_layer

    lines = [f"logitscope {_installed('logitscope')}",
             f"mlx {_installed('mlx')}, mlx-lm {_installed('mlx-lm')}, Python {sys.version.split()[0]}"]
    layer = speed_layer(fast_blas=True, fast_layers=False)  # before MLX is imported, as the engine does
    fast = layer.blas_status.startswith("OpenBLAS")  # its reason then names the library and threads
    lines.append(f"BLAS: {layer.blas_reason}" if fast else f"BLAS: {layer.blas_status} ({layer.blas_reason})")
    return lines


def main(out: TextIO | None = None) -> int:
    """Print the version lines; returns the exit status (0)."""
    (out or sys.stdout).write("\n".join(version_lines()) + "\n")
    return 0
