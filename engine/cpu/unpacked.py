"""Unpacked 4-bit weights on the CPU, for prompts and, where they are kept, for decoding: part of
the CPU speed layer.

MLX's CPU quantized matmul is a plain loop, fine for decoding one row but many times slower than
OpenBLAS when a prompt chunk brings many rows; above a few rows it is faster to unpack the layer's
weights to float32 (a compiled, fused unpack) and hand the product to BLAS. A layer may also keep
its float32 copy: then every call, decoding included, uses it (BLAS gemv beats the quantized
mat-vec several times over), at the copy's memory. Which layers keep one is measured per model
(`engine.cpu.denseplan`). The unpacked values are exactly what MLX's own dequantize computes, so
results do not change.
"""

from __future__ import annotations

from typing import Any, Callable

import mlx.core as mx
import mlx.nn as nn

# Below this many rows (tokens in one forward pass) MLX's quantized mat-vec beats unpacking the
# weights (the crossover was measured at 8-16 rows: docs/benchmarks-history.md).
DEQUANTIZE_MIN_ROWS = 8
_UNPACKABLE_BITS = (2, 4, 8)  # widths that tile a uint32 exactly


def enable_dequantized_prefill(model: nn.Module, keep_bytes: int = 0) -> int:
    """Make multi-row calls of the model's 4/8/2-bit affine linears go through BLAS; return how many.

    Decoding (one row) keeps MLX's quantized kernel, except on layers whose unpacked weights are
    kept (`_KeepsUnpacked._keep_dense`). Only exact `nn.QuantizedLinear` layers are switched (their
    class is swapped in place, so parameters, freezing and saving are untouched), and a tied
    quantized embedding, whose use as the output head may then keep a copy too; others keep
    their own kernels.

    `keep_bytes` marks layers, in model order (the head last), to keep their float32 weights
    while the total stays within it; 0 keeps none. The engine passes 0 and lets
    `engine.cpu.denseplan` choose by measurement; the budget serves experiments (`engine.bench.worker`).
    Layers without a kept copy unpack transiently for prompts, one layer at a time: a cost per
    forward pass that does not shrink with the number of tokens.
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
    if head is not None:  # switched even without a copy: the plan may give it one after the load
        head.__class__ = _DenseHeadEmbedding
        object.__setattr__(head, "_keep_dense", _unpacked_bytes(head) <= budget)  # after the layers
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

    Why: the first prefill would otherwise pay for it, and where fresh memory is slow to fault in
    (a VM) that costs several times the transient unpacking. The engine calls
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
            layer.hold(dense)
            done += 1
    return done


def _unpackable(layer: nn.QuantizedLinear | nn.QuantizedEmbedding) -> bool:
    return layer.mode == "affine" and layer.bits in _UNPACKABLE_BITS and layer.get("biases") is not None


class _KeepsUnpacked:
    """A quantized layer that may keep its unpacked float32 weight (see `enable_dequantized_prefill`)."""

    # Set per layer by `enable_dequantized_prefill` or `engine.cpu.denseplan` / filled by the
    # first call or `keep_unpacked_weights` (object attributes, not parameters); class defaults
    # serve layers switched without a mark.
    _keep_dense = False
    _dense: mx.array | None = None

    def dense_weight(self) -> mx.array:
        """The unpacked weight: the kept one (made by the first call that needs it), else made now."""
        dense = self._dense
        if dense is None:
            dense = self.unpacked()
            if self._keep_dense:  # filled in by the call that evaluates it
                self.hold(dense)
        return dense

    def hold(self, dense: mx.array) -> None:
        """Keep `dense` and let go of the packed weights it replaces.

        Why: once a layer keeps its copy, every call reads the copy (decoding, prompts, and a tied
        head's lookups), so the packed words, scales and biases are dead weight: with them a 4-bit
        model that kept every copy would hold more than its float32 twin. They
        become empty arrays (not zeros), so a reader that should not be there fails loudly. A
        lazy `dense` still holds the packed arrays it is computed from until it is evaluated.
        """
        layer: Any = self
        object.__setattr__(self, "_dense", dense)
        for name in ("weight", "scales", "biases"):
            layer[name] = mx.zeros((0, 0), dtype=layer[name].dtype)

    def released(self) -> bool:
        """Whether the packed weights were let go (`hold`): this layer can only use its copy now."""
        return self._dense is not None and self["weight"].size == 0  # type: ignore[index]

    def unpacked(self) -> mx.array:
        """The float weight, unpacked now (lazily)."""
        layer: Any = self
        return _unpack(layer["weight"], layer["scales"], layer["biases"], layer.group_size, layer.bits)

    @staticmethod
    def times(x: mx.array, dense: mx.array) -> mx.array:
        """``x @ dense.T`` in x's dtype: BLAS (gemm, or gemv for one row through engine.cpu.gemv_forward).

        No cast when the dtypes agree (the usual float32): MLX's `astype` adds a copy to the graph
        even then, a measurable cost on a chain of small kept layers next to plain float32 Linears.
        """
        return x @ (dense if dense.dtype == x.dtype else dense.astype(x.dtype)).T


class _PrefillDequantizedLinear(_KeepsUnpacked, nn.QuantizedLinear):
    """A QuantizedLinear that unpacks its weights for matmuls over many rows (see module doc)."""

    def __call__(self, x: mx.array) -> mx.array:
        if self._keep_dense or x.size // x.shape[-1] >= DEQUANTIZE_MIN_ROWS:
            return self.dense_call(x, self.dense_weight())
        return self.quantized_call(x)

    def dense_call(self, x: mx.array, dense: mx.array) -> mx.array:
        return self.with_bias(self.times(x, dense))

    def quantized_call(self, x: mx.array) -> mx.array:
        """Few rows without a kept weight: MLX's quantized kernel (`engine.cpu.parallel` splits it)."""
        return nn.QuantizedLinear.__call__(self, x)

    def with_bias(self, y: mx.array) -> mx.array:
        return y + self["bias"] if "bias" in self else y

    def kept_for_decode(self) -> mx.array | None:
        """The unpacked weight decoding reads, once made: only a kept one (None otherwise)."""
        return self._dense if self._keep_dense else None


class _DenseHeadEmbedding(_KeepsUnpacked, nn.QuantizedEmbedding):
    """A tied quantized embedding whose use as the output head runs on its unpacked weight when
    it keeps one, else on MLX's quantized kernel (never unpacked transiently: it is the biggest).

    The head is the biggest single mat-vec of a decode step, so it gains the most from BLAS on
    float32 over MLX's quantized kernel (even on two streams), for 8x the bytes. Looking tokens
    up (`__call__`) reads rows of the kept copy once it exists (the same values: the copy is
    exactly MLX's dequantize), else the packed weights.
    """

    def __call__(self, x: mx.array) -> mx.array:
        dense = self._dense if self._keep_dense else None
        return nn.QuantizedEmbedding.__call__(self, x) if dense is None else dense[x]

    def as_linear(self, x: mx.array) -> mx.array:
        return self.times(x, self.dense_weight()) if self._keep_dense else self.quantized_as_linear(x)

    def quantized_as_linear(self, x: mx.array) -> mx.array:
        """Without a kept weight: MLX's quantized kernel (`engine.cpu.parallel` splits big ones)."""
        return nn.QuantizedEmbedding.as_linear(self, x)


@mx.compile
def _unpack_compiled(packed: mx.array, scales: mx.array, biases: mx.array, shifts: mx.array) -> mx.array:
    """Affine dequantization as one fused kernel (much faster than `mx.dequantize` on a CPU)."""
    bits = 32 // shifts.size
    ints = (packed[..., None] >> shifts) & ((1 << bits) - 1)
    groups = ints.reshape(*scales.shape, -1)
    return (groups * scales[..., None] + biases[..., None]).reshape(packed.shape[0], -1)


def _unpack(packed: mx.array, scales: mx.array, biases: mx.array, group_size: int, bits: int) -> mx.array:
    """Equal to ``mx.dequantize(packed, scales, biases, group_size, bits)`` for 2/4/8 bits."""
    del group_size  # implied by scales' shape
    return _unpack_compiled(packed, scales, biases, mx.arange(0, 32, bits, dtype=mx.uint32))
