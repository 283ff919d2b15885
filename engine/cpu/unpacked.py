"""Unpacked 4-bit weights for CPU prompts (and big layers' decoding): part of the CPU speed layer.

MLX's CPU quantized matmul is a plain loop, fine for decoding one row but ~20x slower than
OpenBLAS when a prompt chunk brings many rows; above a few rows it is faster to unpack the layer's
weights to float32 (a compiled, fused unpack) and hand the product to BLAS. The unpacked values
are exactly what MLX's own dequantize computes, so results do not change.
"""

from __future__ import annotations

from typing import Any, Callable

import mlx.core as mx
import mlx.nn as nn

# Below this many rows (tokens in one forward pass) MLX's quantized mat-vec beats unpacking the
# weights; measured crossover on a 896x4864 layer is 8-16 rows (BENCHMARKS.md).
DEQUANTIZE_MIN_ROWS = 8
# Decoding uses a layer's kept unpacked weight from this many weights up (see `kept_for_decode`).
DENSE_DECODE_MIN_WEIGHTS = 1 << 19
_UNPACKABLE_BITS = (2, 4, 8)  # widths that tile a uint32 exactly


def enable_dequantized_prefill(model: nn.Module, keep_bytes: int = 0) -> int:
    """Make multi-row calls of the model's 4/8/2-bit affine linears go through BLAS; return how many.

    Decoding (one row) keeps MLX's quantized kernel, except on big layers whose unpacked weights
    are kept (`_PrefillDequantizedLinear.kept_for_decode`). Only exact `nn.QuantizedLinear` layers are
    switched (their class is swapped in place, so parameters, freezing and saving are untouched);
    others keep their own kernels.

    `keep_bytes`: unpacking is a fixed cost per prefill pass (~55 ms for a 30M model, ~1.4 s for
    a 0.5B one, whatever the number of tokens), which dominates a short follow-up prompt. Layers,
    in model order, keep their float32 weights after the first prefill while the total stays
    within this budget; the rest unpack transiently, one layer at a time. 0 keeps none.
    """
    switched = 0
    budget = keep_bytes
    for _, layer in model.named_modules():
        if type(layer) is nn.QuantizedLinear and _unpackable(layer):
            layer.__class__ = _PrefillDequantizedLinear
            size = _unpacked_bytes(layer)
            keep = size <= budget
            budget -= size if keep else 0
            object.__setattr__(layer, "_keep_dense", keep)
            switched += 1
    head = _tied_quantized_head(model)
    if head is not None and _unpacked_bytes(head) <= budget:  # after the layers: prefill needs them more
        head.__class__ = _DenseHeadEmbedding
        object.__setattr__(head, "_keep_dense", True)
        switched += 1
    return switched


def _unpacked_bytes(layer: nn.Module) -> int:
    rows, packed = layer["weight"].shape
    return int(rows * packed * (32 // layer.bits) * 4)


def _tied_quantized_head(model: nn.Module) -> nn.QuantizedEmbedding | None:
    """The quantized embedding that is also the output head (mlx-lm models without `lm_head`)."""
    if getattr(model, "lm_head", None) is not None:
        return None
    embedding = getattr(getattr(model, "model", None), "embed_tokens", None)
    return embedding if type(embedding) is nn.QuantizedEmbedding and _unpackable(embedding) else None


def keep_unpacked_weights(model: nn.Module, should_stop: Callable[[], bool]) -> int:
    """Unpack now, layer by layer, the weights `enable_dequantized_prefill` lets prefill keep.

    Why: the first prefill would otherwise pay for it (on a VM, fresh memory makes that ~2.5x the
    transient unpacking: 3.75 s instead of 1.4 s for the Qwen2.5-0.5B shape). The engine calls
    this right after a load, while the user is still typing; `should_stop` is asked between
    layers (a command waiting), and layers not done yet are filled by the first prefill instead.
    Returns how many layers were unpacked.
    """
    done = 0
    layers = [layer for _, layer in model.named_modules() if isinstance(layer, _KeepsUnpacked)]
    for layer in sorted(layers, key=lambda layer: isinstance(layer, _DenseHeadEmbedding)):  # head last
        if layer._keep_dense and layer._dense is None:
            if should_stop():
                break
            dense = layer.unpacked()
            mx.eval(dense)  # before it is kept: a failure here leaves the layer as it was
            object.__setattr__(layer, "_dense", dense)
            done += 1
    return done


def _unpackable(layer: nn.QuantizedLinear | nn.QuantizedEmbedding) -> bool:
    return layer.mode == "affine" and layer.bits in _UNPACKABLE_BITS and layer.get("biases") is not None


class _KeepsUnpacked:
    """A quantized layer that may keep its unpacked float32 weight (see `enable_dequantized_prefill`)."""

    # Set per layer by `enable_dequantized_prefill` / filled by a prefill (object attributes, not
    # parameters); these class defaults serve layers switched without a budget.
    _keep_dense = False
    _dense: mx.array | None = None

    def dense_weight(self) -> mx.array:
        """The unpacked weight: kept from an earlier prefill when the budget allowed, else made now."""
        dense = self._dense
        if dense is None:
            dense = self.unpacked()
            if self._keep_dense:  # filled in by the prefill that evaluates it
                object.__setattr__(self, "_dense", dense)
        return dense

    def unpacked(self) -> mx.array:
        """The float weight, unpacked now (lazily)."""
        layer: Any = self
        return _unpack(layer["weight"], layer["scales"], layer["biases"], layer.group_size, layer.bits)

    @staticmethod
    def times(x: mx.array, dense: mx.array) -> mx.array:
        """``x @ dense.T`` in x's dtype: BLAS (gemm, or gemv for one row through engine.cpu.gemv_forward)."""
        return x @ dense.astype(x.dtype).T


class _PrefillDequantizedLinear(_KeepsUnpacked, nn.QuantizedLinear):
    """A QuantizedLinear that unpacks its weights for matmuls over many rows (see module doc)."""

    def __call__(self, x: mx.array) -> mx.array:
        if x.size // x.shape[-1] >= DEQUANTIZE_MIN_ROWS:
            return self.dense_call(x, self.dense_weight())
        kept = self.kept_for_decode()
        return self.quantized_call(x) if kept is None else self.dense_call(x, kept)

    def dense_call(self, x: mx.array, dense: mx.array) -> mx.array:
        return self.with_bias(self.times(x, dense))

    def quantized_call(self, x: mx.array) -> mx.array:
        """Few rows without a kept weight: MLX's quantized kernel (`engine.cpu.parallel` splits it)."""
        return nn.QuantizedLinear.__call__(self, x)

    def with_bias(self, y: mx.array) -> mx.array:
        return y + self["bias"] if "bias" in self else y

    def kept_for_decode(self) -> mx.array | None:
        """The kept unpacked weight, if this layer is big enough for decoding to use it too.

        A float32 mat-vec (BLAS gemv, memory-bound) beats MLX's CPU quantized mat-vec (bound by
        its unpacking) on big layers: Qwen2.5-0.5B-shaped decode 270 -> 216 ms per token with
        every kept layer; on a 30M model's small layers it lost 5%, hence the size floor.
        """
        dense = self._dense
        return dense if dense is not None and dense.size >= DENSE_DECODE_MIN_WEIGHTS else None


class _DenseHeadEmbedding(_KeepsUnpacked, nn.QuantizedEmbedding):
    """A tied quantized embedding whose use as the output head runs on its kept unpacked weight.

    The head is the biggest single mat-vec of a decode step (Qwen2.5-0.5B shape: 151,936 x 896):
    BLAS on float32 took 29 ms where MLX's quantized kernel on two streams took 54 ms (30M: 1.2
    vs 4.7 ms). Looking tokens up (`__call__`) stays on the packed weights.
    """

    def as_linear(self, x: mx.array) -> mx.array:
        return self.times(x, self.dense_weight())


@mx.compile
def _unpack_compiled(packed: mx.array, scales: mx.array, biases: mx.array, shifts: mx.array) -> mx.array:
    """Affine dequantization as one fused kernel (~10x faster than `mx.dequantize` on CPU)."""
    bits = 32 // shifts.size
    ints = (packed[..., None] >> shifts) & ((1 << bits) - 1)
    groups = ints.reshape(*scales.shape, -1)
    return (groups * scales[..., None] + biases[..., None]).reshape(packed.shape[0], -1)


def _unpack(packed: mx.array, scales: mx.array, biases: mx.array, group_size: int, bits: int) -> mx.array:
    """Equal to ``mx.dequantize(packed, scales, biases, group_size, bits)`` for 2/4/8 bits."""
    del group_size  # implied by scales' shape
    return _unpack_compiled(packed, scales, biases, mx.arange(0, 32, bits, dtype=mx.uint32))
