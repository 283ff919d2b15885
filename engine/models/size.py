"""Whether a model fits in the memory left: asked before a second model is opened beside the first.

Why before: a load that runs the machine out of memory does not fail cleanly, it swaps the
whole desktop to a crawl or gets the process killed, chat and all. The weights' files say what
the load will at least take; the rule adds a quarter for what the runtime builds around them
(norms upcast, the KV cache, the sampler's rows) and 256 MiB of slack. The answer is one line.
"""

from __future__ import annotations

from pathlib import Path

from engine.models.hub import DEMO_SPEC, demo_model_path

WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".npz", ".bin")
OVERHEAD = 1.25  # the weights and a quarter more
SLACK_BYTES = 256 << 20


def weights_bytes(spec: str) -> int | None:
    """The bytes of the model's weight files (None: not a local file or folder, so unknown)."""
    path = demo_model_path() if spec.strip() == DEMO_SPEC else Path(spec.strip()).expanduser()
    try:
        if path.is_file():
            return path.stat().st_size
        if path.is_dir():
            sizes = [f.stat().st_size for f in path.iterdir() if f.suffix in WEIGHT_SUFFIXES and f.is_file()]
            return sum(sizes) if sizes else None
    except OSError:
        return None
    return None


def needed_bytes(weights: int) -> int:
    return int(weights * OVERHEAD) + SLACK_BYTES


def why_it_does_not_fit(spec: str, available: int) -> str | None:
    """One line when `spec`'s weights (by the rule above) need more than `available` bytes; None
    when they fit, or when either number is unknown (0 or None: the platform does not say)."""
    weights = weights_bytes(spec)
    if weights is None or available <= 0:
        return None
    need = needed_bytes(weights)
    if need <= available:
        return None
    return (f"Not opened: it needs about {need / 2**30:.1f} GiB ({weights / 2**30:.1f} GiB of weights) and "
            f"{available / 2**30:.1f} GiB is free beside the model already loaded.")
