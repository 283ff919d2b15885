"""Fast BLAS on/off and compute dtype float32/bfloat16, each configuration in a fresh process.

See `engine.bench.worker` for why a process per configuration. Rounds alternate through the
configurations so machine drift spreads evenly over them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from engine.bench.report import Section, alternate


def run_worker(config: dict[str, Any], timeout_s: float = 600.0) -> dict[str, Any]:
    """One measurement in a fresh interpreter; raises RuntimeError with the worker's last line."""
    done = subprocess.run([sys.executable, "-m", "engine.bench.worker", json.dumps(config)],
                          capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"benchmark worker failed: {tail}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def process_section(section: Section, shape: str, prompt: int, decode: int, rounds: int, budget_s: float) -> None:
    """Prefill and decode tok/s of plain mlx-lm for BLAS x dtype, with ratios against the default."""
    configs = {
        f"{blas}, {dtype}": {"shape": shape, "blas": blas == "OpenBLAS", "dtype": dtype, "prompt": prompt,
                             "decode": decode, "budget_s": budget_s}
        for blas in ("OpenBLAS", "reference BLAS") for dtype in ("float32", "bfloat16")
    }
    fast = {**configs["OpenBLAS, float32"], "dequant_prefill": True, "two_stream": True}
    configs["OpenBLAS, float32, dequantized prefill + two streams"] = fast
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}

    def contender(name: str) -> Any:
        def measure(_round: int) -> float:
            results[name].append(run_worker(configs[name]))
            return 0.0
        return measure

    alternate({name: contender(name) for name in configs}, rounds)
    for name, runs in results.items():
        section.add(f"prefill {prompt} tokens, {name} ({shape})", [r["prefill_tps"] for r in runs], "tok/s")
        section.add(f"decode, {name} ({shape})", [r["decode_tps"] for r in runs], "tok/s")
    best = results["OpenBLAS, float32"]
    for name in ("OpenBLAS, bfloat16", "reference BLAS, float32", "reference BLAS, bfloat16"):
        for kind in ("prefill_tps", "decode_tps"):
            section.compare(f"{kind.split('_')[0]}: OpenBLAS+float32 / {name}",
                            [r[kind] for r in best], [r[kind] for r in results[name]])
    fastest = results["OpenBLAS, float32, dequantized prefill + two streams"]
    for kind in ("prefill_tps", "decode_tps"):
        section.compare(f"{kind.split('_')[0]}: + dequantized prefill + two streams / OpenBLAS+float32",
                        [r[kind] for r in fastest], [r[kind] for r in best])
    section.notes.append(f"active BLAS in the OpenBLAS runs: {best[0]['blas']}" if best else "no runs")
