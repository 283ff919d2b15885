"""Compute dtype: choosing it, and casting a (quantized) model without changing what it computes.

The reference is the model in its own dtype (bfloat16 scales/norms/activations, like most MLX
hub models). Casting to float32 computes the same function with more precise arithmetic (every
bfloat16 value is exactly representable in float32), so the only difference is the reference's
own bfloat16 rounding. Stated tolerance, per position of a 32-token prompt over the whole vocab:
max |log p_f32 - log p_ref| <= 0.25 nats and total variation distance <= 0.05.
(Measured on these models: <= 0.035 nats / 0.006 TV unquantized, <= 0.14 nats / 0.03 TV 4-bit.)
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx.utils import tree_flatten
from mlx_lm.models import llama, qwen2

from engine.cpu.unpacked import _unpack, enable_dequantized_prefill, keep_unpacked_weights
from engine.local.precision import apply_compute_dtype, choose_compute_dtype, model_dtype

MAX_LOGPROB_DIFF = 0.25
MAX_TOTAL_VARIATION = 0.05


def _tiny(arch: str, seed: int, quantized: bool) -> nn.Module:
    """A 2-layer random model in bfloat16, optionally 4-bit quantized (group size 32)."""
    mx.random.seed(seed)
    shape = dict(hidden_size=64, num_hidden_layers=2, intermediate_size=128, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=256)
    if arch == "llama":
        model: nn.Module = llama.Model(llama.ModelArgs(model_type="llama", rms_norm_eps=1e-5,
                                                       tie_word_embeddings=False, **shape))
    else:
        model = qwen2.Model(qwen2.ModelArgs(model_type="qwen2", rms_norm_eps=1e-6,
                                            tie_word_embeddings=True, **shape))
    model.set_dtype(mx.bfloat16)
    if quantized:
        nn.quantize(model, group_size=32, bits=4)
    mx.eval(model.parameters())
    return model


def _logprobs(model: nn.Module, tokens: mx.array) -> mx.array:
    logits = model(tokens).astype(mx.float32)
    return logits - mx.logsumexp(logits, axis=-1, keepdims=True)


def _arrays(model: nn.Module) -> dict[str, mx.array]:
    return dict(tree_flatten(model.parameters()))


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("quantized", [False, True])
def test_float32_compute_matches_the_bfloat16_reference(arch: str, quantized: bool) -> None:
    model = _tiny(arch, seed=3, quantized=quantized)
    tokens = mx.random.randint(0, 256, (1, 32), key=mx.random.key(7))
    reference = _logprobs(model, tokens)

    assert apply_compute_dtype(model, "float32") == "float32"
    assert model(tokens).dtype == mx.float32  # activations follow the cast scales/embeddings
    out = _logprobs(model, tokens)

    assert mx.abs(out - reference).max().item() <= MAX_LOGPROB_DIFF
    total_variation = 0.5 * mx.abs(mx.exp(out) - mx.exp(reference)).sum(axis=-1)
    assert total_variation.max().item() <= MAX_TOTAL_VARIATION
    assert mx.abs(out - reference).max().item() > 0  # it really computed in another dtype


def test_packed_weights_are_kept_and_everything_floating_is_cast() -> None:
    model = _tiny("qwen2", seed=1, quantized=True)
    before = _arrays(model)
    apply_compute_dtype(model, "float32")
    after = _arrays(model)

    assert before.keys() == after.keys()
    packed = [name for name, a in before.items() if a.dtype == mx.uint32]
    assert any(name.endswith("embed_tokens.weight") for name in packed)
    assert any(name.endswith("mlp.down_proj.weight") for name in packed)
    for name in packed:
        assert after[name].dtype == mx.uint32 and mx.array_equal(after[name], before[name]).item()
    for name, a in after.items():
        if name not in packed:
            assert a.dtype == mx.float32, name
            assert mx.array_equal(a.astype(mx.bfloat16), before[name]).item(), name  # lossless


def test_model_leaves_the_model_untouched_and_reports_its_dtype() -> None:
    model = _tiny("llama", seed=2, quantized=True)
    before = _arrays(model)
    assert apply_compute_dtype(model, "model") == "bfloat16"
    assert all(a is before[name] for name, a in _arrays(model).items())


def test_casting_down_and_model_dtype() -> None:
    model = _tiny("llama", seed=2, quantized=False)
    model.set_dtype(mx.float32)
    assert model_dtype(model) == "float32"
    assert apply_compute_dtype(model, "float16") == "float16"
    assert model_dtype(model) == "float16"
    assert {a.dtype for a in _arrays(model).values()} == {mx.float16}


@pytest.mark.parametrize(
    ("setting", "device", "expected"),
    [
        ("auto", mx.cpu, "float32"),
        ("auto", mx.Device(mx.cpu), "float32"),
        ("auto", "cpu", "float32"),
        ("auto", mx.gpu, "model"),
        ("auto", "gpu", "model"),
        ("bfloat16", mx.cpu, "bfloat16"),
        ("float32", mx.gpu, "float32"),
        ("model", mx.cpu, "model"),
    ],
)
def test_choose_compute_dtype(setting: str, device: object, expected: str) -> None:
    assert choose_compute_dtype(setting, device) == expected


def test_bad_settings_are_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="compute_dtype must be one of") as info:
        choose_compute_dtype("fp8", mx.cpu)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="got 'int8'"):
        apply_compute_dtype(_tiny("llama", seed=0, quantized=False), "int8")


def test_dequantized_prefill_computes_the_same_logits() -> None:
    model = _tiny("llama", seed=4, quantized=True)
    apply_compute_dtype(model, "float32")
    tokens = mx.random.randint(0, 256, (1, 32), key=mx.random.key(5))
    one_row = tokens[:, :1]
    reference, reference_one = model(tokens), model(one_row)

    assert enable_dequantized_prefill(model) == 2 * 7 + 1  # q k v o gate up down per layer, lm_head
    assert enable_dequantized_prefill(model) == 0  # idempotent
    assert mx.allclose(model(tokens), reference, atol=1e-4, rtol=1e-4).item()
    assert mx.array_equal(model(one_row), reference_one).item()  # decoding keeps MLX's kernel
    assert type(model.model.embed_tokens) is nn.QuantizedEmbedding


def test_prefill_keeps_unpacked_weights_within_the_budget() -> None:
    model = _tiny("llama", seed=4, quantized=True)
    apply_compute_dtype(model, "float32")
    tokens = mx.random.randint(0, 256, (1, 32), key=mx.random.key(5))
    reference = model(tokens)
    layers = [layer for _, layer in model.named_modules() if type(layer) is nn.QuantizedLinear]
    sizes = [layer["scales"].size * layer.group_size * 4 for layer in layers]  # float32 bytes unpacked
    budget = sum(sizes[:3])  # room for the first three layers, in model order
    enable_dequantized_prefill(model, keep_bytes=budget)
    assert [layer._keep_dense for layer in layers] == [i < 3 for i in range(len(layers))]
    first = model(tokens)
    assert mx.allclose(first, reference, atol=1e-4, rtol=1e-4).item()
    kept = [layer._dense for layer in layers[:3]]
    assert all(dense is not None for dense in kept) and all(layer._dense is None for layer in layers[3:])
    assert mx.array_equal(model(tokens), first).item()  # the kept weights give identical results
    assert all(layer._dense is dense for layer, dense in zip(layers, kept))  # reused, not rebuilt


def test_kept_weights_can_be_unpacked_ahead_and_the_work_stops_when_asked() -> None:
    model = _tiny("llama", seed=4, quantized=True)
    apply_compute_dtype(model, "float32")
    tokens = mx.random.randint(0, 256, (1, 32), key=mx.random.key(5))
    reference = model(tokens)
    enable_dequantized_prefill(model, keep_bytes=1 << 40)
    layers = [layer for _, layer in model.named_modules() if getattr(layer, "_keep_dense", False)]
    asked: list[int] = []
    assert keep_unpacked_weights(model, lambda: len(asked.append(0) or asked) > 2) == 2  # stopped at the third
    assert [layer._dense is not None for layer in layers[:3]] == [True, True, False]
    assert keep_unpacked_weights(model, lambda: False) == len(layers) - 2  # the rest
    kept = [layer._dense for layer in layers]
    assert mx.allclose(model(tokens), reference, atol=1e-4, rtol=1e-4).item()
    assert all(layer._dense is dense for layer, dense in zip(layers, kept))  # the prefill used them


@pytest.mark.parametrize(("bits", "group_size"), [(2, 32), (4, 64), (8, 128)])
def test_unpacking_equals_mlx_dequantize(bits: int, group_size: int) -> None:
    weight = mx.random.normal((96, 256), key=mx.random.key(bits))
    packed = mx.quantize(weight, group_size, bits)
    expected = mx.dequantize(*packed, group_size=group_size, bits=bits)
    assert mx.array_equal(_unpack(*packed, group_size, bits), expected).item()


def test_layers_that_cannot_be_unpacked_keep_their_kernel() -> None:
    model = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64), nn.Linear(64, 64))
    nn.quantize(model, group_size=32, bits=4, class_predicate=lambda p, m: p == "layers.0")
    nn.quantize(model, group_size=32, bits=3, class_predicate=lambda p, m: p == "layers.1")
    nn.quantize(model, mode="mxfp4", class_predicate=lambda p, m: p == "layers.2")
    assert enable_dequantized_prefill(model) == 1
    assert [type(layer).__name__ for layer in model.layers] == [
        "_PrefillDequantizedLinear", "QuantizedLinear", "QuantizedLinear"]


def test_two_stream_decode_is_exact_and_only_splits_big_layers() -> None:
    from engine.cpu.parallel import _TwoStreamEmbedding, _TwoStreamLinear, enable_two_stream_decode

    model = _tiny("qwen2", seed=6, quantized=True)  # tied, quantized embedding = lm_head
    apply_compute_dtype(model, "float32")
    tokens = mx.random.randint(0, 256, (1, 24), key=mx.random.key(8))
    prefill, step = model(tokens), model(tokens[:, :1])

    assert enable_two_stream_decode(model, min_outputs=128) == 2 * 2 + 1  # gate, up per layer + lm_head
    kinds = {type(m) for _, m in model.named_modules()}
    assert {_TwoStreamLinear, _TwoStreamEmbedding} <= kinds and nn.QuantizedLinear not in kinds
    assert mx.array_equal(model(tokens[:, :1]), step).item()  # same kernel, halves of the rows
    assert mx.allclose(model(tokens), prefill, atol=1e-4, rtol=1e-4).item()  # the BLAS prefill path


@pytest.mark.parametrize("two_stream", [False, True])
def test_decoding_uses_every_kept_weight_whatever_its_size(monkeypatch: pytest.MonkeyPatch, two_stream: bool) -> None:
    """A kept unpacked weight serves one-row calls too, small layers included (a size floor once
    left a 30M model's 56 small layers on MLX's slow quantized kernel while it held their copies);
    layers without a kept weight stay on the quantized kernel. Same logits either way."""
    from engine.cpu import unpacked as dtype
    from engine.cpu.parallel import enable_two_stream_decode

    model = _tiny("qwen2", seed=6, quantized=True)
    apply_compute_dtype(model, "float32")
    step = mx.random.randint(0, 256, (1, 1), key=mx.random.key(9))
    reference = model(step)
    linears = [layer for _, layer in model.named_modules() if type(layer) is nn.QuantizedLinear]
    enable_dequantized_prefill(model, keep_bytes=sum(_unpacked_size(layer) for layer in linears[:5]))
    if two_stream:  # the engine's order (engine.cpu.CpuLayer.tune): gate and up become two-stream
        enable_two_stream_decode(model, min_outputs=128)
    keep_unpacked_weights(model, lambda: False)
    used: list[int] = []
    real = dtype._PrefillDequantizedLinear.dense_call

    def spying(self: dtype._PrefillDequantizedLinear, x: mx.array, dense: mx.array) -> mx.array:
        used.append(id(self))
        return real(self, x, dense)

    monkeypatch.setattr(dtype._PrefillDequantizedLinear, "dense_call", spying)
    got = model(step)
    assert sorted(used) == sorted(id(layer) for layer in linears[:5])
    assert all(layer["weight"].size * 8 < 1 << 19 for layer in linears[:5])  # under the old floor
    assert mx.allclose(got, reference, atol=1e-4, rtol=1e-4).item()


def _unpacked_size(layer: nn.Module) -> int:
    return int(layer["scales"].size * layer.group_size * 4)


def test_a_tied_quantized_head_keeps_its_unpacked_weight_when_the_budget_allows() -> None:
    from engine.cpu.unpacked import _DenseHeadEmbedding

    tokens = mx.random.randint(0, 256, (1, 12), key=mx.random.key(3))
    model = _tiny("qwen2", seed=6, quantized=True)  # tied: the embedding is the output head
    apply_compute_dtype(model, "float32")
    reference, reference_one = model(tokens), model(tokens[:, :1])
    linears = [layer for _, layer in model.named_modules() if type(layer) is nn.QuantizedLinear]
    layers_only = sum(layer["scales"].size * layer.group_size * 4 for layer in linears)
    enable_dequantized_prefill(model, keep_bytes=layers_only)  # no room left for the head
    head = model.model.embed_tokens
    assert type(head) is _DenseHeadEmbedding and not head._keep_dense  # switched, kept by a later plan only
    keep_unpacked_weights(model, lambda: False)
    assert head._dense is None
    hidden = mx.random.normal((1, 1, 64), key=mx.random.key(4))
    assert mx.array_equal(head.as_linear(hidden), nn.QuantizedEmbedding.as_linear(head, hidden)).item()

    model = _tiny("qwen2", seed=6, quantized=True)
    apply_compute_dtype(model, "float32")
    assert enable_dequantized_prefill(model, keep_bytes=1 << 40) == 2 * 7 + 1  # the layers, then the head
    head = model.model.embed_tokens
    assert type(head) is _DenseHeadEmbedding
    lookups = nn.QuantizedEmbedding.__call__(head, tokens)
    order: list[bool] = []
    keep_unpacked_weights(model, lambda: len(order.append(head._dense is not None) or order) > 2 * 7)
    assert head._dense is None and not any(order)  # the head comes last: stopped before it
    keep_unpacked_weights(model, lambda: False)
    assert head._dense is not None
    assert mx.allclose(model(tokens[:, :1]), reference_one, atol=1e-4, rtol=1e-4).item()
    assert mx.allclose(model(tokens), reference, atol=1e-4, rtol=1e-4).item()
    assert mx.array_equal(head(tokens), lookups).item()  # lookups: rows of the copy, the same values
    assert head["weight"].size == 0  # the copy replaced the packed weights


def test_an_untied_model_keeps_its_embedding_packed() -> None:
    model = _tiny("llama", seed=4, quantized=True)  # its own lm_head
    enable_dequantized_prefill(model, keep_bytes=1 << 40)
    assert type(model.model.embed_tokens) is nn.QuantizedEmbedding
