"""Fast BLAS on/off and compute dtype float32/bfloat16, each configuration in a fresh process.

See `engine.bench.worker` for why a process per configuration. Rounds alternate through the
configurations so machine drift spreads evenly over them.
"""

from __future__ import annotations

import json
from typing import Any

from engine.bench.report import Section, alternate_runs, run_json_module
from engine.bench.shapes import shape_named


# The issue's goals against plain mlx-lm (reference BLAS, weights' bfloat16): an unquantized model
# >= 10x prefill and >= 2x decode from the fast BLAS; a 4-bit one >= 5x decode from the dtype.
PLAIN_TARGETS: dict[bool, dict[str, float]] = {False: {"prefill_tps": 10.0, "decode_tps": 2.0},
                                               True: {"decode_tps": 5.0}}
# The goals name a ~30M model and 4-bit models of real sizes; the 2M shape is far below those.
UNTARGETED_SHAPES = frozenset({"2m"})


def run_worker(config: dict[str, Any], timeout_s: float = 600.0) -> dict[str, Any]:
    """One measurement in a fresh interpreter; raises RuntimeError with the worker's last line."""
    from engine.bench import worker

    return run_json_module(worker, json.dumps(config), timeout_s=timeout_s)


def process_section(section: Section, shape: str, prompt: int, decode: int, rounds: int, budget_s: float) -> None:
    """Prefill and decode tok/s of plain mlx-lm for BLAS x dtype, with ratios against the default.

    "reference BLAS, bfloat16" is plain mlx-lm as a user runs it on Linux: the wheel's BLAS and
    the dtype the weights ship in. "OpenBLAS" alone leaves the gemv forwarding off. "All fast
    paths" adds what the engine does on top of OpenBLAS and float32, still in mlx-lm's
    `generate_step`: the gemv forwarding and the engine's own CPU tuning (`CpuLayer.tune`: the
    layer routes, and for a 4-bit `shape` the kept unpacked weights and two streams). "logitscope's
    engine" is the app's own Engine (one-pass prompt, its sampler, 10 candidates per token).
    """
    configs = {
        f"{blas}, {dtype}": {"shape": shape, "blas": blas == "OpenBLAS", "dtype": dtype, "prompt": prompt,
                             "decode": decode, "budget_s": budget_s}
        for blas in ("OpenBLAS", "reference BLAS") for dtype in ("float32", "bfloat16")
    }
    quantized = shape_named(shape).bits is not None
    targets = {} if shape in UNTARGETED_SHAPES else PLAIN_TARGETS[quantized]
    fast_name, engine_name = "all of logitscope's fast paths", "logitscope's engine, 10 candidates"
    configs[fast_name] = {**configs["OpenBLAS, float32"], "engine_tuning": True, "gemv_forward": True}
    configs[engine_name] = {**configs["OpenBLAS, float32"], "gemv_forward": True, "engine": True}
    results = alternate_runs(configs, rounds, run_worker)
    for name, runs in results.items():
        section.add(f"prefill {prompt} tokens, {name} ({shape})", [r["prefill_tps"] for r in runs], "tok/s")
        section.add(f"decode, {name} ({shape})", [r["decode_tps"] for r in runs], "tok/s")
    best = results["OpenBLAS, float32"]
    for name in ("OpenBLAS, bfloat16", "reference BLAS, float32", "reference BLAS, bfloat16"):
        for kind in ("prefill_tps", "decode_tps"):
            section.compare(f"{kind.split('_')[0]}: OpenBLAS+float32 / {name} ({shape})",
                            [r[kind] for r in best], [r[kind] for r in results[name]])
    plain = results["reference BLAS, bfloat16"]
    for kind in ("prefill_tps", "decode_tps"):
        section.compare(f"{kind.split('_')[0]}: all fast paths / OpenBLAS+float32 ({shape})",
                        [r[kind] for r in results[fast_name]], [r[kind] for r in best])
        for label, name in (("all fast paths", fast_name), ("engine", engine_name)):
            section.compare(f"{kind.split('_')[0]}: {label} / reference BLAS, bfloat16 ({shape})",
                            [r[kind] for r in results[name]], [r[kind] for r in plain],
                            targets.get(kind))
    section.notes.append(f"{shape}: active BLAS in the OpenBLAS runs: {best[0]['blas']}" if best else f"{shape}: no runs")
