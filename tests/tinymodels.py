"""Tiny, offline test models: random-weight Llama models with real trained tokenizers.

Each builder writes an ordinary mlx-lm model folder (config.json, model.safetensors, tokenizer
files) so the engine loads it through the normal load path. The tokenizer is a byte-level BPE
trained on a small generated corpus (with emoji and CJK, so some characters span several tokens)
and saved as a transformers `PreTrainedTokenizerFast` with a ChatML, a Llama-3 style or no chat
template. Weights are random but scaled so that logits are peaky: greedy decoding then has no
near-ties, and a reply computed with a reused cache must match a cold one token for token.
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
