"""Models with random weights at realistic shapes, built offline for benchmarking.

Why random weights: speed depends on shapes, dtypes and quantization, not on what the weights
say, and nothing may be downloaded. Sizes are chosen to bracket what the app is used with: a
~2M and a ~30M llama (the sizes a laptop CPU decodes fast, where per-token overhead shows), and
the real shape of Qwen2.5-0.5B-Instruct (the most common small chat model), 4-bit like the MLX
community's builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # MLX is imported only when a model is built: the fast BLAS must load first
    import mlx.nn as nn


@dataclass(frozen=True)
class Shape:
    """One benchmark model: its mlx-lm architecture and config (as in a config.json)."""

    name: str
    config: dict[str, object]
    bits: int | None = None  # None = not quantized; else affine, group size 64
    dtype: str = "bfloat16"  # the dtype hub models ship in

    def with_bits(self, bits: int | None) -> "Shape":
        suffix = f"-{bits}bit" if bits else ""
        return Shape(self.name.split("-")[0] + suffix, self.config, bits, self.dtype)


def _llama(hidden: int, layers: int, heads: int, intermediate: int, vocab: int) -> dict[str, object]:
    return {
        "model_type": "llama", "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": heads, "intermediate_size": intermediate,
        "vocab_size": vocab, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True,
        "max_position_embeddings": 4096,
    }


SHAPES: dict[str, Shape] = {
    "2m": Shape("2m", _llama(hidden=128, layers=6, heads=4, intermediate=512, vocab=4096)),
    "30m": Shape("30m", _llama(hidden=384, layers=8, heads=6, intermediate=1152, vocab=32000)),
    "qwen0.5b": Shape("qwen0.5b", {
        "model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24,
        "num_attention_heads": 14, "num_key_value_heads": 2, "intermediate_size": 4864,
        "vocab_size": 151936, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "tie_word_embeddings": True, "max_position_embeddings": 32768,
    }, bits=4),
}


def shape_named(name: str) -> Shape:
    """'30m', '30m-4bit', 'qwen0.5b' (4-bit by default), 'qwen0.5b-bf16' (not quantized)."""
    base, _, suffix = name.partition("-")
    if base not in SHAPES:
        raise ValueError(f"unknown benchmark shape {name!r}; known: {', '.join(SHAPES)}")
    shape = SHAPES[base]
    if suffix == "":
        return shape
    if suffix in ("bf16", "full"):
        return shape.with_bits(None)
    if suffix.endswith("bit") and suffix[:-3].isdigit():
        return shape.with_bits(int(suffix[:-3]))
    raise ValueError(f"bad shape suffix {suffix!r}: use -4bit, -8bit or -bf16")


def build_model(shape: Shape, seed: int = 0) -> "nn.Module":
    """The mlx-lm model for `shape`, random weights, in the shape's dtype, quantized if asked."""
    import mlx.core as mx
    import mlx.nn as nn
    from mlx_lm.utils import _get_classes  # mlx-lm's own config -> (Model, ModelArgs) lookup

    model_class, args_class = _get_classes(config=dict(shape.config))
    mx.random.seed(seed)
    model = model_class(args_class.from_dict(dict(shape.config)))
    model.set_dtype(getattr(mx, shape.dtype))
    if shape.bits:
        nn.quantize(model, group_size=64, bits=shape.bits)
    mx.eval(model.parameters())
    return model


def parameter_count(model: "nn.Module") -> int:
    """Parameters as the unquantized model would count them (packed 4-bit words hold 8 each)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    total = 0
    flat: list[tuple[str, mx.array]] = tree_flatten(model.parameters())  # type: ignore[assignment]
    for name, array in flat:
        if name.endswith((".scales", ".biases")) and array.dtype != mx.uint32:
            continue
        total += array.size * (32 // _bits_of(model, name) if array.dtype == mx.uint32 else 1)
    return total


def _bits_of(model: "nn.Module", name: str) -> int:
    """The bit width of the quantized layer that owns parameter `name`."""
    owner: object = model
    for part in name.split(".")[:-1]:
        owner = owner[int(part)] if part.isdigit() else getattr(owner, part)  # type: ignore[index]
    return int(getattr(owner, "bits", 32))
