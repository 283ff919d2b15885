"""Rebuild the demo model: ``python -m engine.models.demo --out engine/models/demo_model``.

The fast BLAS is enabled first, before anything imports MLX, because training on MLX's
reference BLAS would take hours instead of minutes.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import fields
from pathlib import Path

from engine.cpu.blas import enable_fast_blas


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """``--out`` plus an override for every `TrainConfig` field (for experiments and tests)."""
    from engine.models.demo.train import TrainConfig

    parser = argparse.ArgumentParser(prog="python -m engine.models.demo", description="Rebuild the demo chat model.")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "demo_model")
    for f in fields(TrainConfig):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Train and save; print the numbers worth reporting."""
    blas = enable_fast_blas()
    print(f"BLAS: {blas.reason}", flush=True)
    from engine.models.demo.train import TrainConfig, train

    args = parse_args(argv)
    cfg = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})
    start = time.perf_counter()
    summary = train(cfg, args.out, log=lambda line: print(line, flush=True))
    size = sum(p.stat().st_size for p in args.out.iterdir() if p.is_file())
    print(f"done in {time.perf_counter() - start:.0f}s: {int(summary['parameters'])} parameters, "
          f"final loss {summary['final_loss']:.4f}, {size / 1e6:.1f} MB in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
