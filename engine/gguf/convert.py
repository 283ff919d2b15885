"""Write a Llama or Qwen2 model folder (config.json, safetensors, tokenizer.json) as one GGUF file.

Why here: the tests and ``logitscope bench`` need GGUF files of models they build themselves
(random weights, offline), and the same model as MLX safetensors and as GGUF is how the two
engines are checked against each other. The layout follows llama.cpp's own converter
(``convert_hf_to_gguf.py``, ``LlamaModel``): the query and key rows are permuted from the
Hugging Face rotate-half order to llama.cpp's interleaved RoPE order, the tokenizer is written as
a byte-level BPE (``gpt2``) vocabulary with its merges and the chat template. Quantized types are
made from the F32 file by llama.cpp's own quantizer (`quantize`, needs the ``[gguf]`` extra).

Needs the ``gguf`` package (the ``[gguf]`` extra) and MLX (to read bfloat16 safetensors); no llama.cpp.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import numpy as np

OutType = Literal["f32", "f16"]
_NAMES = {  # Hugging Face name (after ``model.``) -> GGUF name, per layer
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias",  # qwen2
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
ARCHITECTURES = ("llama", "qwen2")  # qwen2: rotate-half RoPE in llama.cpp too (no row permutation), q/k/v biases
_TOP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight"}


def permute_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """Hugging Face's rotate-half row order of a query or key projection -> llama.cpp's pairs."""
    return (weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def convert_folder(folder: Path, out: Path, out_type: OutType = "f32") -> Path:
    """Write `folder`'s Llama model to `out` as GGUF (F32 or F16 matrices; norms stay F32)."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") not in ARCHITECTURES:
        raise ValueError(f"only {' and '.join(ARCHITECTURES)} folders convert here, not {config.get('model_type')!r}")
    writer = gguf.GGUFWriter(str(out), config["model_type"])
    _write_config(writer, config, out_type)
    _write_tokenizer(writer, folder, config)
    for name, array in _gguf_tensors(folder, config):
        keep_f32 = out_type == "f32" or array.ndim == 1
        writer.add_tensor(name, array.astype(np.float32 if keep_f32 else np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _write_config(writer: Any, config: dict[str, Any], out_type: OutType) -> None:
    """The hyperparameters llama.cpp's Llama loader reads."""
    import gguf

    heads = config["num_attention_heads"]
    writer.add_name("logitscope-test")
    writer.add_context_length(config.get("max_position_embeddings", 2048))
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(config.get("num_key_value_heads", heads))
    writer.add_layer_norm_rms_eps(config.get("rms_norm_eps", 1e-5))
    writer.add_rope_freq_base(config.get("rope_theta", 10000.0))
    writer.add_rope_dimension_count(config.get("head_dim") or config["hidden_size"] // heads)
    writer.add_vocab_size(config["vocab_size"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32 if out_type == "f32" else gguf.LlamaFileType.MOSTLY_F16)


def _write_tokenizer(writer: Any, folder: Path, config: dict[str, Any]) -> None:
    """A byte-level BPE vocabulary (``gpt2``): tokens in id order, their kinds, merges, template."""
    import gguf

    spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    if not _byte_level(spec):
        raise ValueError("only byte-level BPE tokenizers (GPT-2, Llama 3, Qwen 2 style) convert here; "
                         "for others use llama.cpp's convert_hf_to_gguf.py")
    vocab: dict[str, int] = spec["model"]["vocab"]
    added = {entry["id"]: entry for entry in spec.get("added_tokens", [])}
    size = config["vocab_size"]
    tokens = [f"[PAD{i}]" for i in range(size)]
    kinds = [gguf.TokenType.UNUSED] * size
    for text, index in vocab.items():
        if index < size:
            tokens[index], kinds[index] = text, gguf.TokenType.NORMAL
    for index, entry in added.items():
        if index < size:
            tokens[index] = entry["content"]
            kinds[index] = gguf.TokenType.CONTROL if entry.get("special") else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"].get("merges", [])]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")  # llama.cpp's GPT-2 split, as a ByteLevel tokenizer's (its "default" differs)
    writer.add_token_list(tokens)
    writer.add_token_types(kinds)
    writer.add_token_merges(merges)
    _write_special_ids(writer, folder, config, vocab, added)


def _byte_level(spec: dict[str, Any]) -> bool:
    """Whether a tokenizer.json is a byte-level BPE (its pre-tokenizer or decoder is ByteLevel).

    A Llama 2 style one (BPE over SentencePiece pieces: "▁" for spaces, byte fallback) written as
    ``gpt2`` would load, but split and decode text differently from the model's own tokenizer.
    """
    def has_byte_level(part: Any) -> bool:
        if not isinstance(part, dict):
            return False
        inner = part.get("pretokenizers") or part.get("decoders") or []
        return part.get("type") == "ByteLevel" or any(has_byte_level(p) for p in inner)
    return spec.get("model", {}).get("type") == "BPE" and (
        has_byte_level(spec.get("pre_tokenizer")) or has_byte_level(spec.get("decoder")))


def _write_special_ids(writer: Any, folder: Path, config: dict[str, Any], vocab: dict[str, int],
                       added: dict[int, dict[str, Any]]) -> None:
    """bos / eos ids and the chat template, from tokenizer_config.json and config.json."""
    by_text = {**vocab, **{entry["content"]: index for index, entry in added.items()}}
    settings_file = folder / "tokenizer_config.json"
    settings = json.loads(settings_file.read_text(encoding="utf-8")) if settings_file.is_file() else {}
    bos = settings.get("bos_token")
    if isinstance(bos, str) and bos in by_text:
        writer.add_bos_token_id(by_text[bos])
    writer.add_add_bos_token(False)  # the chat template (or the caller) writes bos itself
    eos = config.get("eos_token_id")
    if isinstance(eos, list):
        eos = eos[0]
    if isinstance(eos, int):
        writer.add_eos_token_id(eos)
    template = settings.get("chat_template")
    jinja = folder / "chat_template.jinja"
    if template is None and jinja.is_file():
        template = jinja.read_text(encoding="utf-8")
    if isinstance(template, str):
        writer.add_chat_template(template)


def _gguf_tensors(folder: Path, config: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    """Every weight under its GGUF name; a Llama's query and key rows permuted for llama.cpp's RoPE."""
    weights = _float32_weights(folder)
    permute = config["model_type"] == "llama"
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    out: list[tuple[str, np.ndarray]] = []
    for name, array in weights.items():
        if name in _TOP:
            out.append((_TOP[name], array))
            continue
        layer, rest = name.removeprefix("model.layers.").split(".", 1)
        if permute and rest.endswith("q_proj.weight"):
            array = permute_rows(array, heads)
        elif permute and rest.endswith("k_proj.weight"):
            array = permute_rows(array, kv_heads)
        out.append((f"blk.{layer}.{_NAMES[rest]}", array))
    return out


def _float32_weights(folder: Path) -> dict[str, np.ndarray]:
    """Every tensor of the folder's safetensors files in float32 (bfloat16 ones too, which numpy's
    safetensors reader cannot open: MLX reads those)."""
    import mlx.core as mx

    weights: dict[str, np.ndarray] = {}
    for file in sorted(folder.glob("*.safetensors")):
        loaded = mx.load(str(file))
        assert isinstance(loaded, dict)
        weights.update({k: np.array(v.astype(mx.float32)) for k, v in loaded.items()})
    return weights
