"""Tiny, offline test models: random-weight Llama models with real trained tokenizers.

Each builder writes an ordinary mlx-lm model folder (config.json, model.safetensors, tokenizer
files) so the engine loads it through the normal load path. The tokenizer is a byte-level BPE
trained on a small generated corpus (with emoji and CJK, so some characters span several tokens)
and saved as a transformers `PreTrainedTokenizerFast` with a ChatML, a Llama-3 style or no chat
template. Weights are random but scaled so that logits are peaky: greedy decoding then has no
near-ties, and a reply computed with a reused cache must match a cold one token for token.

`build_family` writes the same kind of folder for any family in `FAMILY_CONFIGS` (mlx-lm's own
module for it, 2 layers, hidden 64), in bfloat16 or 4-bit: among them Mamba-2 (`"mamba2"`) and a
Mamba-2/attention hybrid (`"granitemoehybrid"`, Granite-4-H), whose caches cannot be trimmed,
the latent-attention families, and GPT-2 / GPT-BigCode (context length in `n_positions`).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Literal

Template = Literal["chatml", "llama3", "none"]

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

LLAMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    " + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

# template -> (special tokens, bos, eos, chat template)
_FLAVOURS: dict[str, tuple[list[str], str | None, str, str | None]] = {
    "chatml": (["<|endoftext|>", "<|im_start|>", "<|im_end|>"], None, "<|im_end|>", CHATML_TEMPLATE),
    "llama3": (
        ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
        "<|begin_of_text|>",
        "<|eot_id|>",
        LLAMA3_TEMPLATE,
    ),
    "none": (["<s>", "</s>"], "<s>", "</s>", None),
}

_WORDS = (
    "the a cat dog sat on mat ran far away and then it was happy sad big small red blue "
    "hello world how are you today I am fine thanks what is your name my tiny model says "
    "once upon time there lived little bird who liked sing songs every morning user assistant system"
).split()
_EXOTIC = ["😀", "🙂", "世界", "你好", "こんにちは", "café", "naïve", "🚀"]


def corpus(lines: int = 600, seed: int = 0) -> list[str]:
    """A small generated corpus: mostly English-like words, some emoji and CJK."""
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(4, 12))]
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words)), rng.choice(_EXOTIC))
        out.append(" ".join(words) + rng.choice([".", "!", "?", ","]))
    return out


def build_tokenizer(folder: Path, template: Template, vocab_size: int = 400) -> int:
    """Train a byte-level BPE tokenizer and save it into `folder`; returns its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials, bos, eos, chat_template = _FLAVOURS[template]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=eos,
        additional_special_tokens=[s for s in specials if s not in (bos, eos)],
    )
    if chat_template is not None:
        fast.chat_template = chat_template
    fast.save_pretrained(str(folder))
    return len(fast)


def build_model(
    folder: Path,
    template: Template = "chatml",
    *,
    seed: int = 0,
    max_position_embeddings: int = 512,
    sliding_window: int | None = None,
) -> Path:
    """Write a complete tiny mlx-lm model folder; returns it.

    With `sliding_window`, the first layer attends over a window through mlx-lm's
    RotatingKVCache, a cache that stops being trimmable once it wraps.
    """
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models.llama import Model, ModelArgs

    folder.mkdir(parents=True, exist_ok=True)
    vocab = build_tokenizer(folder, template)
    specials, bos, eos, _ = _FLAVOURS[template]
    config = {
        "model_type": "llama",
        "hidden_size": 48,
        "num_hidden_layers": 2,
        "intermediate_size": 96,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5,
        "vocab_size": vocab,
        "max_position_embeddings": max_position_embeddings,
        "tie_word_embeddings": False,
        "eos_token_id": specials.index(eos),
        "torch_dtype": "float32",
    }
    if sliding_window is not None:
        config.update(layer_types=["sliding_attention", "full_attention"], sliding_window=sliding_window)
    mx.random.seed(seed)
    model = Model(ModelArgs.from_dict(config))
    _make_peaky(model)
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(folder / "model.safetensors"), weights)
    (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return folder


def _make_peaky(model: Any) -> None:
    """Scale the random weights so logits spread widely and the context clearly matters."""
    import mlx.core as mx

    args = model.args
    inner = model.model
    inner.embed_tokens.weight = mx.random.normal(inner.embed_tokens.weight.shape)
    model.lm_head.weight = mx.random.normal((args.vocab_size, args.hidden_size))
    for layer in inner.layers:
        layer.self_attn.o_proj.weight = layer.self_attn.o_proj.weight * 4.0
        layer.mlp.down_proj.weight = layer.mlp.down_proj.weight * 2.0
    mx.eval(model.parameters())


def with_extra_eos(source: Path, folder: Path, extra_eos: int) -> Path:
    """A copy of a model folder whose config also stops on `extra_eos` (to test stopping)."""
    import shutil

    shutil.copytree(source, folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config["eos_token_id"] = [config["eos_token_id"], extra_eos]
    (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return folder


# ---------------------------------------------------------------------------------------------
# One tiny model per mlx-lm family (random weights, real mlx-lm modules)

_HIDDEN, _HEADS, _KV_HEADS, _HEAD_DIM, _FFN = 64, 4, 2, 16, 128
_BASE: dict[str, Any] = {
    "hidden_size": _HIDDEN, "num_hidden_layers": 2, "intermediate_size": _FFN,
    "num_attention_heads": _HEADS, "num_key_value_heads": _KV_HEADS, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "tie_word_embeddings": False,
}
_MLA: dict[str, Any] = {  # multi-head latent attention: the value head differs from the query head
    "kv_lora_rank": 32, "q_lora_rank": 48, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16,
    "v_head_dim": 12, "num_key_value_heads": _HEADS,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128, "beta_fast": 32,
                     "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707},
}
_MAMBA2: dict[str, Any] = {
    "num_heads": 8, "head_dim": 16, "state_size": 16, "conv_kernel": 4, "n_groups": 2,
    "use_bias": False, "use_conv_bias": True, "layer_norm_epsilon": 1e-5, "time_step_limit": [0.0, 1e9],
    "time_step_rank": "auto",
}

# family -> the keys its mlx-lm ModelArgs needs on top of `_BASE` (model_type is the family's
# name unless given). Sizes stay tiny: 2 layers, hidden 64, so a model builds in well under a second.
FAMILY_CONFIGS: dict[str, dict[str, Any]] = {
    "llama": {},
    "mistral": {"sliding_window": 6, "layer_types": ["sliding_attention", "full_attention"]},
    "qwen2": {},
    "qwen3": {"head_dim": _HEAD_DIM},
    "qwen3_moe": {"head_dim": _HEAD_DIM, "num_experts": 4, "num_experts_per_tok": 2, "decoder_sparse_step": 1,
                  "mlp_only_layers": [], "moe_intermediate_size": 32, "norm_topk_prob": True},
    "gemma": {"head_dim": _HEAD_DIM},
    "gemma2": {"head_dim": _HEAD_DIM, "query_pre_attn_scalar": _HEAD_DIM, "attn_logit_softcapping": 50.0,
               "final_logit_softcapping": 30.0},
    "gemma3_text": {"head_dim": _HEAD_DIM, "query_pre_attn_scalar": _HEAD_DIM, "sliding_window": 6,
                    "sliding_window_pattern": 2},
    "phi3": {"max_position_embeddings": 512, "original_max_position_embeddings": 512},
    "olmo2": {},
    "granite": {"logits_scaling": 2.0, "attention_multiplier": 0.25, "embedding_multiplier": 2.0,
                "residual_multiplier": 0.5, "attention_bias": False, "mlp_bias": False},
    "starcoder2": {"norm_epsilon": 1e-5},
    "cohere": {"layer_norm_eps": 1e-5, "logit_scale": 0.5, "use_qk_norm": False},
    "internlm2": {"bias": False},
    "glm4": {"head_dim": _HEAD_DIM, "attention_bias": True, "partial_rotary_factor": 0.5},
    "deepseek_v2": {**_MLA, "moe_intermediate_size": 32, "n_routed_experts": 4, "n_shared_experts": 1,
                    "num_experts_per_tok": 2, "first_k_dense_replace": 1},
    "deepseek_v2_lite": {**_MLA, "model_type": "deepseek_v2", "q_lora_rank": None},
    "deepseek_v3": {**_MLA, "moe_intermediate_size": 32, "n_routed_experts": 4, "n_shared_experts": 1,
                    "num_experts_per_tok": 2, "first_k_dense_replace": 1, "n_group": 2, "topk_group": 1},
    "minicpm3": {**{k: v for k, v in _MLA.items() if k != "v_head_dim"}, "dim_model_base": 32, "scale_depth": 1.4,
                 "scale_emb": 2.0, "rope_scaling": {"type": "longrope", "original_max_position_embeddings": 128,
                                                    "short_factor": [1.0] * 4, "long_factor": [2.0] * 4}},
    "youtu_llm": {**_MLA, "tie_word_embeddings": True, "rope_scaling": None},
    "mamba2": {**_MAMBA2, "hidden_size": _HIDDEN, "intermediate_size": 128},
    "granitemoehybrid": {  # Granite-4-H: Mamba-2 layers and an attention layer (dense MLP)
        "layer_types": ["mamba", "attention"], "logits_scaling": 2.0, "attention_multiplier": 0.25,
        "embedding_multiplier": 2.0, "residual_multiplier": 0.5, "attention_bias": False, "mlp_bias": False,
        "position_embedding_type": "rope", "shared_intermediate_size": _FFN, "mamba_n_heads": 8, "mamba_d_head": 16,
        "mamba_proj_bias": False, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_n_groups": 2,
        "mamba_conv_bias": True,
    },
    "gpt2": {"n_ctx": 64, "n_embd": _HIDDEN, "n_head": _HEADS, "n_layer": 2, "n_positions": 64,
             "layer_norm_epsilon": 1e-5},
    "gpt_bigcode": {"n_embd": _HIDDEN, "n_layer": 2, "n_inner": _FFN, "n_head": _HEADS, "n_positions": 64,
                    "layer_norm_epsilon": 1e-5},
}
LATENT_ATTENTION_FAMILIES = ("deepseek_v2", "deepseek_v2_lite", "deepseek_v3", "minicpm3", "youtu_llm")
SSM_FAMILIES = ("mamba2", "granitemoehybrid")

# Families whose published configs state no context length (a recurrent state has no positions).
_NO_STATED_LENGTH = ("mamba2",)

# Output projections whose weights are scaled up so that the context clearly moves the logits.
_OUTPUT_LAYERS = ("o_proj", "down_proj", "out_proj", "c_proj", "wo", "w2", "dense")


def family_config(family: str, vocab_size: int, eos_token_id: int, **overrides: Any) -> dict[str, Any]:
    """The config.json of a tiny `family` model (`overrides` last: a context key, say)."""
    own = FAMILY_CONFIGS[family]
    config: dict[str, Any] = {"model_type": family, **_BASE, **own}
    if "n_positions" not in own and family not in _NO_STATED_LENGTH:  # as the family's published configs
        config["max_position_embeddings"] = 512
    config.update(vocab_size=vocab_size, eos_token_id=eos_token_id, bos_token_id=eos_token_id, pad_token_id=eos_token_id,
                  torch_dtype="bfloat16", **overrides)
    return config


def build_family(
    folder: Path, family: str, *, bits: int | None = None, template: Template = "chatml", seed: int = 0,
    **overrides: Any,
) -> Path:
    """Write a tiny model folder of mlx-lm's `family` (a key of FAMILY_CONFIGS); returns it.

    Weights are random (peaky, as `build_model`'s) and stored in bfloat16, or 4-bit (group size 32)
    with bfloat16 scales when `bits` is 4, as models are published. Mamba-2 ("mamba2") and the
    Mamba-2/attention hybrid ("granitemoehybrid", Granite-4-H) are here for cache tests too: their
    caches hold recurrent state that cannot be trimmed. `overrides` replace config keys.
    """
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.utils import _get_classes

    folder.mkdir(parents=True, exist_ok=True)
    vocab = build_tokenizer(folder, template)
    specials, _, eos, _ = _FLAVOURS[template]
    config = family_config(family, vocab, specials.index(eos), **overrides)
    model_class, args_class = _get_classes(config)
    mx.random.seed(seed)
    model = model_class(args_class.from_dict(config))
    _make_any_peaky(model)
    model.set_dtype(mx.bfloat16)
    if bits is not None:
        config = _quantized(model, config, bits)
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return folder


def _make_any_peaky(model: Any) -> None:
    """`_make_peaky` for any family: unit-normal embeddings and output head, louder output layers."""
    import mlx.core as mx
    from mlx.utils import tree_flatten, tree_unflatten

    changed = []
    for name, value in tree_flatten(model.parameters()):
        parts = name.split(".")
        if parts[-1] != "weight" or value.ndim != 2:
            continue
        if any(p in ("embed_tokens", "lm_head", "wte", "tok_embeddings", "output", "embeddings") for p in parts):
            changed.append((name, mx.random.normal(value.shape)))
        elif parts[-2] in _OUTPUT_LAYERS:
            changed.append((name, value * 4.0))
    model.update(tree_unflatten(changed))
    mx.eval(model.parameters())


def _quantized(model: Any, config: dict[str, Any], bits: int) -> dict[str, Any]:
    """Quantize `model` in place the way mlx-lm's convert does; returns the config that says so."""
    import contextlib
    import io

    from mlx_lm.utils import quantize_model

    with contextlib.redirect_stdout(io.StringIO()):  # it prints the bits per weight
        _, quantized = quantize_model(model, config, group_size=32, bits=bits)
    return dict(quantized)
