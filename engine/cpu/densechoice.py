"""Which 4-bit layers keep a float32 copy for decoding: chosen from measured costs (pure, no MLX).

Why: MLX's CPU quantized mat-vec is bound by its unpacking, not by memory, so on a CPU a float32
copy of a layer's weights (BLAS gemv) decodes that layer several times faster (30M shape:
~0.3 ms -> ~0.035 ms for a 1152x384 layer) but holds 6-8x the bytes of the packed weights. Whether
a copy is worth its bytes depends on the model and the machine: on a small model the whole step
is those mat-vecs and the process's resident memory dwarfs the copies; on a big one the copies
can multiply the resident memory for a modest gain. A fixed share of RAM cannot tell the two
apart; decode speed per byte of resident memory can.

The rule: with the step time T and resident memory M, decode speed per byte is 1 / (T * M).
Copies are ranked best first (most time saved per byte; a copy that saves nothing is never
taken, nor one past the memory limit), and of every prefix of that ranking the one with the
smallest (T - saved) * (M + bytes) is kept (or all of them when that is an even trade, within
10%: `_best_prefix`). A prefix, not a copy at a time: one small layer's
copy may not pay for its bytes while all of them together do (30M shape, T = 19.7 ms and
M = 127 MB: one 1152x384 layer saves 1.2% of the step for 1.4% more memory; all 56 layers save
~45% for ~48% more, time x memory x0.81).
"""

from __future__ import annotations

from dataclasses import dataclass

TIE = 0.10  # step x memory products this close count as equal (timing noise on a shared CPU)


@dataclass(frozen=True)
class LayerCost:
    """One quantized layer as decoding sees it: one-row mat-vec times both ways, the copy's cost."""

    name: str  # the layer's path in the model ("model.layers.0.mlp.up_proj")
    added_bytes: int  # what keeping its float32 copy adds: the copy, less the packed weights it frees
    quantized_s: float  # a mat-vec on MLX's quantized kernel (as decoding calls it)
    dense_s: float  # the same on the float32 copy

    @property
    def saving_s(self) -> float:
        return self.quantized_s - self.dense_s

    @property
    def saving_per_byte(self) -> float:
        return self.saving_s / max(self.added_bytes, 1)


@dataclass(frozen=True)
class DenseChoice:
    """The layers to keep as float32 copies, in the order chosen, and the step they predict."""

    kept: tuple[str, ...]
    step_s: float  # predicted decode step with the kept copies
    resident_bytes: int  # predicted resident memory with them
    base_step_s: float  # the step with none (every layer on the quantized kernel)
    base_resident_bytes: int

    @property
    def kept_bytes(self) -> int:
        return self.resident_bytes - self.base_resident_bytes

    def speed_per_gb(self) -> tuple[float, float]:
        """Decode tokens per second per GB resident: (with none kept, with the choice)."""
        return _per_gb(self.base_step_s, self.base_resident_bytes), _per_gb(self.step_s, self.resident_bytes)


def choose_dense(costs: list[LayerCost], rest_s: float, resident_bytes: int, limit_bytes: int) -> DenseChoice:
    """Keep the copies that raise decode speed per byte of resident memory (see the module doc).

    `rest_s`: the step's time outside these layers (attention, norms, sampling); `resident_bytes`:
    the process's resident memory with no copy kept (never taken below 1); `limit_bytes`: the most
    all kept copies together may add. Deterministic: ties in saving per byte go by name.
    """
    base_step = max(rest_s, 0.0) + sum(cost.quantized_s for cost in costs)
    base_memory = max(resident_bytes, 1)
    step, memory, room = base_step, base_memory, limit_bytes
    taken: list[LayerCost] = []
    prefixes = [(base_step, base_memory)]  # (step, memory) with the first i ranked copies kept
    for cost in sorted(costs, key=lambda c: (-c.saving_per_byte, c.name)):
        if cost.saving_s <= 0 or cost.added_bytes > room:
            continue
        step, memory, room = step - cost.saving_s, memory + cost.added_bytes, room - cost.added_bytes
        taken.append(cost)
        prefixes.append((step, memory))
    length = _best_prefix(prefixes)
    step, memory = prefixes[length]
    return DenseChoice(tuple(cost.name for cost in taken[:length]), step, memory, base_step, base_memory)


def _best_prefix(prefixes: list[tuple[float, int]]) -> int:
    """The prefix with the smallest step x memory, unless keeping every copy that fits (the
    fastest prefix) comes within `TIE` of that product: then all of them.

    Why: on the Qwen2.5-0.5B shape, all copies and none come out even (14.0 tok/s at 2.48 GB
    against 4.17 tok/s at 0.74 GB: 5.66 tok/s per GB both), so the strict minimum flipped between
    them with the machine's load at measuring time, a 3.4x difference in speed for the whole
    session. Within the measurement's noise speed per GB does not decide, and the memory is
    there (every prefix is within the limit), so the user gets the speed.
    """
    products = [step * memory for step, memory in prefixes]
    best = min(range(len(products)), key=lambda i: (products[i], i))
    fastest = len(prefixes) - 1
    return fastest if products[fastest] <= products[best] * (1 + TIE) else best


def _per_gb(step_s: float, resident_bytes: int) -> float:
    return 0.0 if step_s <= 0 else (1.0 / step_s) / (resident_bytes / 1e9)
