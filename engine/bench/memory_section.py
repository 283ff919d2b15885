"""4-bit MLX models on the CPU: decode speed next to the bytes each decoded token reads and the
resident memory, against the same shape unquantized (float32), each in a fresh process
(`engine.bench.memory_worker`).

Why: the CPU fast path keeps float32 copies of 4-bit layers for decoding where it measures that
they raise decode speed per GB (MLX's CPU quantized mat-vec is slow; `engine.cpu.denseplan`),
which reads more bytes per token and holds more memory than the packed weights. A 4-bit model
should not decode slower than its float32 twin while using more memory; these rows say whether
it does ("4-bit / float32" decode >= 1, peak memory <= 1), and how many bytes of copies it kept.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from engine.bench.bandwidth import read_bandwidth, share_of_bound
from engine.bench.report import Section, alternate_runs, run_json_module
from engine.bench.shapes import shape_named


def _worker(config: dict[str, Any]) -> dict[str, Any]:
    from engine.bench import memory_worker

    return run_json_module(memory_worker, json.dumps(config), timeout_s=900.0)


def memory_section(section: Section, shapes: tuple[str, ...], prompt: int, decode: int, rounds: int) -> None:
    """For every 4-bit shape in `shapes`: rows for it and its float32 twin, and the two ratios;
    each decode speed also as a share of this machine's memory bandwidth bound."""
    bandwidth = read_bandwidth()
    section.add("memory read bandwidth (numpy sums, every CPU)", [bandwidth / 1e9], "GB/s")
    for shape in (s for s in shapes if shape_named(s).bits):
        twin = shape_named(shape).with_bits(None).name + "-full"
        with tempfile.TemporaryDirectory() as root:  # written once, by processes of their own
            folders = {name: _worker({"shape": name, "write": str(Path(root) / name)})["folder"]
                       for name in (shape, twin)}
            results = _alternated(folders, prompt, decode, rounds)
        _report(section, shape, twin, results, bandwidth)


def _alternated(folders: dict[str, str], prompt: int, decode: int, rounds: int) -> dict[str, list[dict[str, Any]]]:
    """Each model's measurements, the models alternating round by round, a fresh process each."""
    configs = {name: {"shape": name, "folder": folder, "prompt": prompt, "decode": decode}
               for name, folder in folders.items()}
    return alternate_runs(configs, rounds, _worker)


def _report(section: Section, shape: str, twin: str, results: dict[str, list[dict[str, Any]]],
            bandwidth: float) -> None:
    """Per model: speed, bytes per token, peak memory, copies kept, speed per GB, share of the
    bandwidth bound; then the ratios."""
    for name, runs in results.items():
        section.add(f"decode, 10 candidates ({name})", [r["decode_tps"] for r in runs], "tok/s")
        section.add(f"share of the bandwidth bound ({name})",
                    [share_of_bound(r["decode_tps"], r["decode_bytes"], bandwidth) for r in runs], "%")
        section.add(f"weights read per decoded token ({name})", [r["decode_bytes"] / 1e6 for r in runs], "MB")
        section.add(f"peak resident memory ({name})", [r["peak_rss_bytes"] / 1e6 for r in runs], "MB")
        section.add(f"float32 copies of 4-bit layers kept ({name})",
                    [r.get("kept_bytes", 0) / 1e6 for r in runs], "MB")
        section.add(f"decode speed per GB resident ({name})",
                    [r["decode_tps"] / (r["peak_rss_bytes"] / 1e9) for r in runs], "tok/s/GB")
    q, f = results[shape], results[twin]
    section.compare(f"decode: 4-bit / float32 ({shape})", [r["decode_tps"] for r in q],
                    [r["decode_tps"] for r in f], 1.0)
    section.compare(f"peak memory: 4-bit / float32 ({shape})", [r["peak_rss_bytes"] for r in q],
                    [r["peak_rss_bytes"] for r in f], 1.0, at_most=True)
