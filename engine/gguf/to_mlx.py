"""Write a GGUF file's model as an MLX model folder: config.json, model.safetensors, tokenizer files.

Why: the same weights through both engines is how they are checked against each other on real
models (tests/test_real_mlx.py), and ``logitscope convert FILE.gguf DIR`` gives a user the MLX
engine (its CPU speed layer, its families) on a model they only have as GGUF. No PyTorch:
the ``gguf`` package reads the file and dequantizes every tensor with numpy
(``gguf.quants.dequantize``: F32, F16, BF16, Q4_0..Q8_0 and the K-quants), and the ``safetensors``
package writes them. The weights come out exactly as llama.cpp dequantizes them, in float32 (or
float16 when asked: smaller, rounded).

The layout is llama.cpp's own converter (``convert_hf_to_gguf.py``) run backwards: a Llama's query
and key rows go back from llama.cpp's interleaved RoPE order to Hugging Face's rotate-half order,
Gemma 3's norms lose the 1 its converter added (``Gemma3RMSNorm`` adds it back), and the
hyperparameters go under the keys mlx-lm reads (``rope_theta`` at the top: see
`engine.models.ropeconfig` for why that matters). Families: ``llama`` (Llama, SmolLM, Mistral),
``qwen2`` and ``gemma3``; any other is refused in one line, as is anything in a file this cannot
map exactly (an unknown tensor, llama.cpp's per-frequency RoPE factors, logit soft-capping).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from engine.core.api import ModelLoadError

OutDtype = Literal["float32", "float16"]
PROBE = ("Hello, world! It's 2024: naïve café, 你好世界 🙂🚀\n\tdef f(x):  return x**2 \r\n  the cat sat 1234567,"
         " <|im_start|>user\nhi<|im_end|>")
FAMILIES = ("llama", "qwen2", "gemma3")
_LAYER = {  # GGUF name (after blk.N.) -> Hugging Face name (after model.layers.N.)
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_GEMMA3_LAYER = {**_LAYER, "ffn_norm.weight": "pre_feedforward_layernorm.weight",
                 "post_attention_norm.weight": "post_attention_layernorm.weight",
                 "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
                 "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight"}
_TOP = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight"}
_GEMMA3_SWA_BASE = 10000.0  # llama.cpp's fixed RoPE base of Gemma 3's sliding-window layers
_GEMMA3_SWA_PATTERN = 6  # every sixth layer attends globally, as llama.cpp sets it


def convert_to_mlx(spec: str, out: Path, dtype: OutDtype = "float32",
                   report: Callable[[str], None] = lambda _: None) -> Path:
    """``logitscope convert``: check that `spec` is a readable GGUF file, write its model into
    `out` (`convert_gguf`), then check the written tokenizer against llama.cpp's (`check_tokenizer`).
    Raises ModelLoadError (one line); what it wrote stays for the caller to take back."""
    from engine.gguf.load import check_file

    path = check_file(spec)
    convert_gguf(path, out, dtype, report)
    check_tokenizer(path, out)
    return out


def convert_gguf(path: Path, out: Path, dtype: OutDtype = "float32",
                 report: Callable[[str], None] = lambda _: None) -> Path:
    """Write `path`'s model into the folder `out` (made if missing; must hold no config.json).
    Raises ModelLoadError (one line) for a file or family it cannot convert."""
    import gguf

    from engine.gguf.hf_tokenizer import write_tokenizer

    if (out / "config.json").exists():
        raise ModelLoadError(f"{out} already holds a model (config.json); choose an empty folder")
    report(f"reading {path.name}")
    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as error:  # a truncated or damaged file
        raise ModelLoadError(f"cannot read {path.name}: {' '.join(str(error).split())[:160]}") from error
    meta = {key: field.contents() for key, field in reader.fields.items() if not key.startswith("GGUF.")}
    family = meta.get("general.architecture")
    if family not in FAMILIES:
        raise ModelLoadError(f"{path.name}: its architecture {family!r} does not convert to MLX here "
                             f"({', '.join(FAMILIES)} do)")
    config = mlx_config(meta, family, path.name)
    out.mkdir(parents=True, exist_ok=True)
    report("writing the tokenizer")
    write_tokenizer(meta, out, path.name)
    report("dequantizing the weights")
    weights = hf_weights(reader.tensors, family, config, path.name)
    config["vocab_size"] = int(weights["model.embed_tokens.weight"].shape[0])
    config["tie_word_embeddings"] = "lm_head.weight" not in weights
    _save(weights, out / "model.safetensors", dtype)
    config["torch_dtype"] = dtype
    (out / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    report(f"wrote {out}")
    return out


def mlx_config(meta: dict[str, Any], family: str, name: str) -> dict[str, Any]:
    """config.json for mlx-lm from the file's ``<family>.*`` hyperparameters."""
    def key(suffix: str, default: Any = None) -> Any:
        value = meta.get(f"{family}.{suffix}", default)
        if value is None:
            raise ModelLoadError(f"{name}: the file does not state {family}.{suffix}")
        return value

    heads = int(key("attention.head_count"))
    hidden = int(key("embedding_length"))
    config: dict[str, Any] = {
        "hidden_size": hidden,
        "num_hidden_layers": int(key("block_count")),
        "intermediate_size": int(key("feed_forward_length")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(key("attention.head_count_kv", heads)),
        "head_dim": int(key("attention.key_length", hidden // heads)),
        "rms_norm_eps": float(key("attention.layer_norm_rms_epsilon", 1e-6)),
        "max_position_embeddings": int(key("context_length", 2048)),
        "rope_theta": float(key("rope.freq_base", 10000.0)),
    }
    if meta.get(f"{family}.final_logit_softcapping") or meta.get(f"{family}.attn_logit_softcapping"):
        raise ModelLoadError(f"{name}: its logits are soft-capped, which mlx-lm's {family} model does not do")
    scaling = _rope_scaling(meta, family, name)
    if scaling:
        config["rope_scaling"] = scaling
    for index_key, config_key in (("tokenizer.ggml.bos_token_id", "bos_token_id"),
                                  ("tokenizer.ggml.eos_token_id", "eos_token_id")):
        if isinstance(meta.get(index_key), int):
            config[config_key] = int(meta[index_key])
    if family == "gemma3":
        config.update(model_type="gemma3_text", architectures=["Gemma3ForCausalLM"],
                      query_pre_attn_scalar=config["head_dim"], rope_local_base_freq=_GEMMA3_SWA_BASE,
                      sliding_window=int(key("attention.sliding_window")), sliding_window_pattern=_GEMMA3_SWA_PATTERN)
    else:
        config.update(model_type=family, architectures=["LlamaForCausalLM" if family == "llama" else "Qwen2ForCausalLM"])
    return config


def _rope_scaling(meta: dict[str, Any], family: str, name: str) -> dict[str, Any] | None:
    """A linear RoPE scaling, as mlx-lm reads it; others refused (they would run unscaled)."""
    kind = meta.get(f"{family}.rope.scaling.type")
    factor = meta.get(f"{family}.rope.scaling.factor")
    if kind in (None, "none") or (kind == "linear" and factor in (None, 1.0)):
        return None
    if kind == "linear":
        return {"rope_type": "linear", "factor": float(factor)}
    raise ModelLoadError(f"{name}: its RoPE scaling {kind!r} does not convert to MLX here (linear does)")


def hf_weights(tensors: Any, family: str, config: dict[str, Any], name: str) -> dict[str, np.ndarray]:
    """Every tensor dequantized to float32 under its Hugging Face name, in Hugging Face's layout."""
    from gguf.quants import dequantize

    layer_names = _GEMMA3_LAYER if family == "gemma3" else _LAYER
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    out: dict[str, np.ndarray] = {}
    for tensor in tensors:
        hf_name = _hf_name(tensor.name, layer_names, name)
        try:
            array = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
        except NotImplementedError as error:
            raise ModelLoadError(f"{name}: its {tensor.tensor_type.name} tensors cannot be dequantized here") from error
        array = array.reshape([int(n) for n in reversed(tensor.shape)])  # ggml lists the fastest axis first
        if family == "llama" and hf_name.endswith("q_proj.weight"):
            array = unpermute_rows(array, heads)
        elif family == "llama" and hf_name.endswith("k_proj.weight"):
            array = unpermute_rows(array, kv_heads)
        if family == "gemma3" and hf_name.endswith("norm.weight"):
            array = array - np.float32(1.0)
        out[hf_name] = array
    return out


def _hf_name(gguf_name: str, layer_names: dict[str, str], name: str) -> str:
    """The Hugging Face name of a GGUF tensor; one line for one this does not know."""
    if gguf_name in _TOP:
        return _TOP[gguf_name]
    if gguf_name.startswith("blk."):
        layer, _, rest = gguf_name[4:].partition(".")
        if layer.isdigit() and rest in layer_names:
            return f"model.layers.{layer}.{layer_names[rest]}"
    raise ModelLoadError(f"{name}: its tensor {gguf_name!r} has no MLX counterpart here; it cannot be converted exactly")


def unpermute_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's interleaved RoPE row order of a query or key projection -> Hugging Face's
    rotate-half order (the inverse of `engine.gguf.convert.permute_rows`)."""
    return (weight.reshape(heads, weight.shape[0] // heads // 2, 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def _save(weights: dict[str, np.ndarray], file: Path, dtype: OutDtype) -> None:
    """model.safetensors in `dtype`, written beside and renamed into place (never half a file)."""
    from safetensors.numpy import save_file

    target = np.float16 if dtype == "float16" else np.float32
    partial = file.with_suffix(".partial")
    save_file({k: np.ascontiguousarray(v.astype(target, copy=False)) for k, v in weights.items()}, str(partial),
              metadata={"format": "pt"})
    partial.replace(file)


def check_tokenizer(path: Path, folder: Path, probe: str = PROBE) -> None:
    """Refuse (one line) a written tokenizer.json that splits `probe` unlike llama.cpp's own
    tokenizer of the file (loaded vocabulary only: no weights, no context)."""
    import llama_cpp
    from tokenizers import Tokenizer

    from engine.gguf.logs import quiet_logs

    quiet_logs(llama_cpp)
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        raise ModelLoadError(f"llama.cpp could not read {path.name}'s vocabulary")
    try:
        raw = probe.encode("utf-8")
        room = len(raw) + 8
        out = (llama_cpp.llama_token * room)()
        vocab = llama_cpp.llama_model_get_vocab(model)
        count = llama_cpp.llama_tokenize(vocab, raw, len(raw), out, room, False, True)
        theirs = list(out[:count])
    finally:
        llama_cpp.llama_model_free(model)
    ours = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(probe, add_special_tokens=False).ids
    if ours != theirs:
        at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        raise ModelLoadError(f"{path.name}: the tokenizer written to {folder.name} splits text unlike llama.cpp's "
                             f"(from token {at} of a probe text); it cannot be used")
