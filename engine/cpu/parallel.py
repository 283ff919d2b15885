"""Use a second CPU core while decoding: each quantized mat-vec split across two MLX streams.

Why: MLX runs each CPU stream's work on one thread, and a decode step is a chain of mat-vecs
(one row of activations times every weight matrix), so one core does everything while the
other idles; OpenBLAS threads do not help because 4-bit mat-vecs never reach BLAS. Splitting a
layer's output rows in two and computing the halves on two streams runs them on two threads;
MLX inserts the cross-stream synchronisation itself. The halves are views of the packed
weights (row slices), so no memory is added and the parameters are unchanged.

The split only pays when a layer is big enough to outweigh the synchronisation (two events
per layer): measured as a win on a Qwen2.5-0.5B-shaped model, a loss on ~30M models (see
docs/benchmarks-history.md, section 2), hence `MIN_SPLIT_OUTPUTS`. Only for the CPU: a GPU is parallel already.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn

from engine.cpu.unpacked import DEQUANTIZE_MIN_ROWS, _DenseHeadEmbedding, _PrefillDequantizedLinear, _unpackable

# Layers with fewer output rows than this stay on one stream (sync would cost more than it saves).
MIN_SPLIT_OUTPUTS = 2048


def enable_two_stream_decode(model: nn.Module, min_outputs: int = MIN_SPLIT_OUTPUTS) -> int:
    """Split big quantized linears (and a tied quantized lm_head) over two CPU streams.

    Call on the thread that will run the model (streams belong to a thread). Returns how many
    layers were switched; 0 on a GPU. Layers also get the multi-row dequantized prefill path
    of `engine.cpu.unpacked.enable_dequantized_prefill`.
    """
    if mx.default_device() != mx.cpu:
        return 0
    second = mx.new_stream(mx.cpu)
    switched = 0
    for _, layer in model.named_modules():
        kind = type(layer)
        if kind in (nn.QuantizedLinear, _PrefillDequantizedLinear) and _unpackable(layer):
            big = layer["weight"].shape[0] >= min_outputs
            layer.__class__ = _TwoStreamLinear if big else _PrefillDequantizedLinear
        elif kind in (nn.QuantizedEmbedding, _DenseHeadEmbedding) and layer["weight"].shape[0] >= min_outputs:
            layer.__class__ = _TwoStreamEmbedding
        else:
            continue
        object.__setattr__(layer, "_second_stream", second)
        switched += type(layer) is not _PrefillDequantizedLinear
    return switched


def _split_matmul(layer: Any, x: mx.array) -> mx.array:
    """x @ W.T with W's output rows halved; the second half runs on the layer's second stream."""
    half = layer["weight"].shape[0] // 2
    weight, scales, biases = layer["weight"], layer["scales"], layer.get("biases")
    kwargs: dict[str, Any] = dict(transpose=True, group_size=layer.group_size, bits=layer.bits, mode=layer.mode)
    first = mx.quantized_matmul(x, weight[:half], scales[:half], biases=_rows(biases, 0, half), **kwargs)
    with mx.stream(layer._second_stream):
        second = mx.quantized_matmul(x, weight[half:], scales[half:], biases=_rows(biases, half, None), **kwargs)
    return mx.concatenate([first, second], axis=-1)


def _rows(array: mx.array | None, start: int, stop: int | None) -> mx.array | None:
    return None if array is None else array[start:stop]


class _TwoStreamLinear(_PrefillDequantizedLinear):
    """The parent's paths (BLAS on unpacked weights for prefill, and for decode where they are
    kept); its quantized decode kernel runs on two streams."""

    def quantized_call(self, x: mx.array) -> mx.array:
        return self.with_bias(_split_matmul(self, x))


class _TwoStreamEmbedding(_DenseHeadEmbedding):
    """A tied quantized lm_head (often the largest single mat-vec): its kept float32 weight when
    it has one (`engine.cpu.denseplan`), else its quantized decode kernel split over two streams."""

    def quantized_as_linear(self, x: mx.array) -> mx.array:
        if x.size // x.shape[-1] >= DEQUANTIZE_MIN_ROWS:
            return super().quantized_as_linear(x)
        return _split_matmul(self, x)
