"""Which floating dtype the model computes in, and casting a loaded model to it.

Why this exists: most MLX models are 4-bit quantized with bfloat16 scales, biases and norms, so
their activations (and KV cache) are bfloat16 too. On Apple GPUs that is the fast path. On a
Linux CPU it is the slowest one: MLX's CPU quantized mat-vec with bfloat16 scales is ~10x slower
than with float32 scales (measured: 27.5 ms vs 2.9 ms for a 896x4864 layer), and float16 is worse
still. Casting everything floating *except the packed 4-bit weights* to float32 keeps the memory
win of quantization (the packed uint32 weights are untouched; scales and biases are 1/16th of
them) and makes decoding ~8x faster (see BENCHMARKS.md).

This is a choice of the engine proper, not of the CPU speed layer: the user's `compute_dtype`
setting applies on every backend ("auto" resolves per device), and it changes the numbers a model
computes, which the speed layer never does.

Only floating arrays are cast, so packed quantized weights (uint32) and integer scales of the
mx-fp formats (uint8) are never touched: quantization is preserved by construction.
"""


from __future__ import annotations

from collections import Counter
from typing import Any, cast

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

# Values accepted by the `compute_dtype` setting, in the order they are documented.
COMPUTE_DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16", "model")

_DTYPES: dict[str, mx.Dtype] = {
    "float32": mx.float32,
    "bfloat16": mx.bfloat16,
    "float16": mx.float16,
}


def dtype_name(dtype: mx.Dtype) -> str:
    """'float32' for mx.float32 (MLX prints dtypes as 'mlx.core.float32')."""
    return str(dtype).rsplit(".", 1)[-1]


def choose_compute_dtype(setting: str, device: Any) -> str:
    """Resolve the user's `compute_dtype` setting to a concrete choice for `device`.

    "auto" means float32 on a CPU (where bfloat16/float16 kernels are slow) and the model's own
    dtype on a GPU (where half precision is fast and halves memory traffic). Returns one of
    "float32", "bfloat16", "float16" or "model". Raises ValueError (one line) on a bad setting.
    `device` is an `mx.Device` or a device type name ("cpu", "gpu").
    """
    if setting not in COMPUTE_DTYPES:
        raise ValueError(f"compute_dtype must be one of {', '.join(COMPUTE_DTYPES)}; got {setting!r}")
    if setting != "auto":
        return setting
    return "float32" if _is_cpu(device) else "model"


def _is_cpu(device: Any) -> bool:
    kind = getattr(device, "type", device)
    return kind == mx.cpu or str(kind).rsplit(".", 1)[-1].lower() == "cpu"


def model_dtype(model: nn.Module) -> str:
    """The model's own floating dtype: the most common one by element count ("float32" if none).

    Counted over floating arrays only, so a 4-bit model reports its scales' dtype, which is
    also the dtype its activations flow in.
    """
    counts: Counter[str] = Counter()
    for _, array in _flat(model):
        if mx.issubdtype(array.dtype, mx.floating):
            counts[dtype_name(array.dtype)] += array.size
    return counts.most_common(1)[0][0] if counts else "float32"


def _flat(model: nn.Module) -> list[tuple[str, mx.array]]:
    return cast("list[tuple[str, mx.array]]", tree_flatten(model.parameters()))


def apply_compute_dtype(model: nn.Module, dtype: str) -> str:
    """Cast every floating parameter of `model` to `dtype`, in place; return the dtype now in use.

    Packed quantized weights are integer arrays and stay as they are; scales, biases, norms,
    non-quantized embeddings and linears are cast. "model" leaves the model untouched. The cast
    arrays are evaluated here so the cost is paid at load time, not on the first token.
    """
    if dtype == "model":
        return model_dtype(model)
    if dtype not in _DTYPES:
        raise ValueError(f"compute dtype must be one of {', '.join(_DTYPES)} or model; got {dtype!r}")
    target = _DTYPES[dtype]
    model.apply(lambda a: a.astype(target) if _needs_cast(a, target) else a)
    mx.eval(model.parameters())
    return dtype


def _needs_cast(array: mx.array, target: mx.Dtype) -> bool:
    return mx.issubdtype(array.dtype, mx.floating) and array.dtype != target
