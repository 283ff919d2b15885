"""Decide, on the loaded model and this machine, which 4-bit layers keep float32 copies.

Why measure: whether a float32 copy pays depends on the layer's shape, the BLAS, the cache sizes
and the model's size next to the process (`engine.cpu.densechoice` says how the choice is made).
On a CPU, MLX's quantized mat-vec is several times slower than BLAS on a float32 copy, small
layers included, but every copy costs memory. A fixed rule (copies within a share of RAM, used
for decoding only above a size) got both wrong on small models: it held every copy and still
decoded the small layers on the slow kernel, slower than the float32 twin for more memory. The
numbers behind this are in docs/benchmarks-history.md (round 7 and the notes at its end).

What is measured, once per load (`plan_dense_copies`, from `CpuLayer.after_load`): a one-token
forward pass with every layer packed (the step; sampling is not in it, which favours copies a
little), and per distinct layer shape one mat-vec each way, interleaved, the fastest of a few
(a fraction of a second for a small model, about a second for a 0.5B one; most of it the step
and the head). The choice follows the machine as it is at load: on a busy one, where OpenBLAS's
threads are descheduled mid-call, the same model may keep no copy at all. It is not
cancellable: a command waiting (a draft being typed is one) would otherwise leave the model
without a choice for its whole session; the unpacking that follows is (`keep_unpacked_weights`),
and what it leaves undone is filled by the first call that needs it. Results never change: a copy is exactly MLX's
dequantize (`engine.cpu.unpacked`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine.core.memory import available_bytes, resident_bytes  # noqa: F401 - their home moved to the core
from typing import Any, Callable

import mlx.core as mx

from engine.cpu.densechoice import DenseChoice, LayerCost, choose_dense
from engine.cpu.unpacked import (_DenseHeadEmbedding, _PrefillDequantizedLinear, _unpack, _unpackable,
                                 _unpacked_bytes)

ROUNDS = 5  # timed runs per shape and way at most (after one warm-up); the fastest counts
ENOUGH_S = 0.05  # fewer rounds once a shape has taken this long, but never fewer than MIN_ROUNDS:
MIN_ROUNDS = 3  # with fewer, a single hiccup during a big layer's one round (the 0.5B head) dropped its copy
STEP_ENOUGH_S = 0.06  # the same for the step, which is measured twice when shorter (a small model's)
MEASURE_MAX_BYTES = 64 << 20  # a bigger layer's float32 side is timed on a slice of its rows, scaled
BATCH_CALLS, BATCH_BYTES = 8, 32 << 20  # small layers: several calls per evaluation, as in a step
MEMORY_SHARE = 2  # kept copies may take at most 1/MEMORY_SHARE of the memory available now


@dataclass(frozen=True)
class Probe:
    """What the plan measures (tests give their own): layer times, the step, the memory."""

    layer_s: Callable[[Any], tuple[float, float]] = field(default=lambda layer: time_layer(layer))
    step_s: Callable[[Any], float] = field(default=lambda model: time_step(model))
    resident_bytes: Callable[[], int] = field(default=lambda: resident_bytes())
    limit_bytes: Callable[[], int] = field(default=lambda: available_bytes() // MEMORY_SHARE)


def plan_dense_copies(model: Any, probe: Probe | None = None) -> DenseChoice | None:
    """Measure, choose, and mark the chosen layers to keep a float32 copy (None: nothing quantized).

    Every candidate's earlier mark and copy are dropped first: the step and the memory are
    measured with every layer packed, and the choice is the whole truth afterwards (a layer whose
    copy already replaced its packed weights is no candidate: it keeps its copy). The copies are
    made by `keep_unpacked_weights` (or the first call that needs one), each then replacing its
    layer's packed weights, which is why a copy costs its bytes less the packed ones.
    """
    probe = probe or Probe()
    layers = dense_candidates(model)
    if not layers:
        return None
    for layer in layers.values():
        _mark(layer, False)
    step = probe.step_s(model)
    costs = _costs(layers, probe)
    if step < STEP_ENOUGH_S:  # again, after: a burst of load rarely spans both (a big model's rest is small)
        step = min(step, probe.step_s(model))
    rest = step - sum(cost.quantized_s for cost in costs)
    choice = choose_dense(costs, rest, probe.resident_bytes(), probe.limit_bytes())
    for name in choice.kept:
        _mark(layers[name], True)
    return choice


def dense_candidates(model: Any) -> dict[str, Any]:
    """The layers that can keep a copy: switched 4-bit linears and a tied quantized output head."""
    head = _tied_head(model)
    return {name: layer for name, layer in model.named_modules()
            if (isinstance(layer, _PrefillDequantizedLinear) or (layer is head and head is not None))
            and not layer.released()}  # a copy that replaced its packed weights stays


def _tied_head(model: Any) -> Any:
    if getattr(model, "lm_head", None) is not None:
        return None
    embedding = getattr(getattr(model, "model", None), "embed_tokens", None)
    unpackable = isinstance(embedding, _DenseHeadEmbedding) and _unpackable(embedding)
    return embedding if unpackable else None  # (a 3-bit one may be two-stream, but never unpacked)


def _costs(layers: dict[str, Any], probe: Probe) -> list[LayerCost]:
    """One measurement per distinct shape and kind, shared by every layer like it."""
    seen: dict[tuple[Any, ...], tuple[float, float]] = {}
    costs = []
    for name, layer in layers.items():
        key = _shape_key(layer)
        if key not in seen:
            seen[key] = probe.layer_s(layer)
        quantized, dense = seen[key]
        costs.append(LayerCost(name, _unpacked_bytes(layer) - _packed_bytes(layer), quantized, dense))
    return costs


def _packed_bytes(layer: Any) -> int:
    """What a kept copy lets go of (`_KeepsUnpacked.hold`)."""
    return sum(int(layer[name].nbytes) for name in ("weight", "scales", "biases"))


def _shape_key(layer: Any) -> tuple[Any, ...]:
    return (type(layer), tuple(layer["weight"].shape), layer.group_size, layer.bits, "bias" in layer)


def _mark(layer: Any, keep: bool) -> None:
    object.__setattr__(layer, "_keep_dense", keep)
    if not keep:
        object.__setattr__(layer, "_dense", None)


def time_layer(layer: Any, rounds: int = ROUNDS) -> tuple[float, float]:
    """(quantized, float32) seconds for one decode mat-vec of `layer`, each as decoding runs it.

    The float32 side of a layer over `MEASURE_MAX_BYTES` is timed on its first rows and scaled
    by the row count (a mat-vec that size is memory-bound, so linear in the rows). A small layer
    is timed over several calls in one evaluation, as a decode step chains them: one call per
    evaluation adds MLX's and OpenBLAS's start-up to each, which would overstate a small layer's
    time by a large factor.
    """
    weight, scales, biases = layer["weight"], layer["scales"], layer["biases"]
    rows = int(weight.shape[0])
    take = max(1, min(rows, MEASURE_MAX_BYTES // max(_unpacked_bytes(layer) // rows, 1)))
    dense = _unpack(weight[:take], scales[:take], biases[:take], layer.group_size, layer.bits)
    mx.eval(dense)
    x = mx.random.normal((1, 1, int(dense.shape[1])), key=mx.random.key(0))
    quantized = layer.quantized_as_linear if isinstance(layer, _DenseHeadEmbedding) else layer.quantized_call
    calls = max(1, min(BATCH_CALLS, BATCH_BYTES // max(int(dense.nbytes), 1)))
    quantized_s, dense_s = _fastest_s((lambda: [quantized(x) for _ in range(calls)],
                                       lambda: [layer.times(x, dense) for _ in range(calls)]), rounds)
    del dense
    mx.clear_cache()  # the slice was transient: give its memory back
    return quantized_s / calls, dense_s / calls * rows / take


def time_step(model: Any) -> float:
    """Seconds for one one-token forward pass (no cache: the weights' share of a decode step)."""
    token = mx.zeros((1, 1), dtype=mx.int32)
    (fastest,) = _fastest_s((lambda: model(token),), ROUNDS, STEP_ENOUGH_S)
    return fastest


def _fastest_s(runs: tuple[Callable[[], Any], ...], rounds: int,
               enough_s: float = ENOUGH_S) -> tuple[float, ...]:
    """Each of `runs`' fastest time, over up to `rounds` rounds after one warm-up (fewer past
    `enough_s` in all); a round runs each once, so a burst of load hits both ways alike.

    The fastest, not the median: the choice lasts the whole session, and on a busy machine
    OpenBLAS's threads are sometimes descheduled mid-call (then a mat-vec's median is many times
    its fastest); that says nothing about the layer, and medians flipped a small model's choice
    from run to run.
    """
    mx.eval([run() for run in runs])
    best = [float("inf")] * len(runs)
    spent = 0.0
    for round_ in range(rounds):
        for index, run in enumerate(runs):
            start = time.perf_counter()
            mx.eval(run())
            took = time.perf_counter() - start
            best[index], spent = min(best[index], took), spent + took
        if spent >= enough_s and round_ + 1 >= MIN_ROUNDS:
            break
    return tuple(best)


