"""Which format to pick on a CPU (#31.5): every format of one shape in one table, each as the app
runs it by default: decode speed with 10 candidates, peak resident memory, and the share of this
machine's memory bandwidth bound the speed reaches (`engine.bench.bandwidth`).

The formats: the MLX folder in float32 and in 4-bit (logitscope's CPU fast path, its float32
copies of 4-bit layers included), and the GGUF file in F32, F16, Q8_0 and Q4_0 through llama.cpp
(its thread count measured at the load, as the app does). Each measurement is a fresh process
(`engine.bench.memory_worker`: peak memory is per process), the formats alternating round by round.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path
from typing import Any

from engine.bench.bandwidth import read_bandwidth, share_of_bound
from engine.bench.memory_section import _worker
from engine.bench.report import Section, alternate_runs

GGUF_KINDS = ("F32", "F16", "Q8_0", "Q4_0")


def formats_section(section: Section, shapes: tuple[str, ...], scratch: Path, prompt: int, decode: int,
                    rounds: int) -> None:
    """Rows for every format of each shape named in `shapes` (its suffix ignored)."""
    bandwidth = read_bandwidth()
    section.add("memory read bandwidth (numpy sums, every CPU)", [bandwidth / 1e9], "GB/s")
    for base in dict.fromkeys(s.split("-")[0] for s in shapes if s.split("-")[0] in ("2m", "30m", "qwen0.5b")):
        with tempfile.TemporaryDirectory() as root:
            results = alternate_runs(_configs(base, Path(root), scratch, prompt, decode), rounds, _worker)
        for name, runs in results.items():
            tag = f"{base}, {name}"
            section.add(f"decode, 10 candidates ({tag})", [r["decode_tps"] for r in runs], "tok/s")
            section.add(f"peak resident memory ({tag})", [r["peak_rss_bytes"] / 1e6 for r in runs], "MB")
            section.add(f"weights read per token ({tag})", [r["decode_bytes"] / 1e6 for r in runs], "MB")
            section.add(f"share of the bandwidth bound ({tag})",
                        [share_of_bound(r["decode_tps"], r["decode_bytes"], bandwidth) for r in runs], "%")
    if importlib.util.find_spec("llama_cpp") is None:
        section.notes.append("GGUF rows need the [gguf] extra: in logitscope's folder, python3 -m pip install \".[gguf]\"")


def _configs(base: str, root: Path, scratch: Path, prompt: int, decode: int) -> dict[str, dict[str, Any]]:
    """Each format's worker configuration (the MLX folders written here by processes of their own)."""
    configs: dict[str, dict[str, Any]] = {}
    for name, shape in (("MLX float32", f"{base}-full"), ("MLX 4-bit", f"{base}-4bit")):
        folder = _worker({"shape": shape, "write": str(root / shape)})["folder"]
        configs[name] = {"shape": shape, "folder": folder, "prompt": prompt, "decode": decode}
    if importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None:
        from engine.bench.gguf_section import gguf_files

        files = gguf_files(base, scratch)
        for kind in GGUF_KINDS:
            configs[f"GGUF {kind}"] = {"gguf": str(files[kind]), "threads": 0, "prompt": prompt, "decode": decode}
    return configs
