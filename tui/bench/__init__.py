"""``logitscope bench``: how fast the engine, the sampler and the screen are, measured offline.

Importing this package stays cheap (no MLX): the fast BLAS must be chosen before MLX loads.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``logitscope bench [--model SPEC] [--rounds N] [--quick] [--json]``."""
    from tui.bench.cli import main as run_cli

    return run_cli(argv)
