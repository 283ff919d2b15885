"""Tiny GGUF files with a SentencePiece vocabulary (``tokenizer.ggml.model = llama``), built offline.

The vocabulary is a real SentencePiece BPE model trained here on a few sentences (byte fallback
on: the 256 tokens ``<0x00>``..``<0xFF>``; two user-defined chat markers; Llama's settings: no
normalization, spaces kept), written the way llama.cpp's ``convert_hf_to_gguf.py`` writes one
(``_create_vocab_sentencepiece``: piece, score, token type per id). The weights are random: the
tests look at tokens, not at what the model says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

CORPUS = [
    "Once upon a time there was a little cat who liked to sit in the sun.",
    "The cat sat on the mat and the dog sat on the log.",
    "Hello, world! How are you today? I am fine, thank you.",
    "She said: it's a lovely day, isn't it? Let's go to the park.",
    "def square(x):\n    return x * x\n",
    "Numbers like 12, 345 and 2024 appear in text too.",
    "A naïve café in Zürich serves crème brûlée.",
] * 20
MARKERS = ["<|user|>", "<|assistant|>"]
# Zephyr's template, as TinyLlama-1.1B-Chat's GGUF files carry it (eos after every message).
TEMPLATE = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\n' + message['content'] + eos_token + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
HIDDEN, LAYERS, HEADS, FF = 32, 1, 2, 64


def train_spm(folder: Path, vocab_size: int = 320) -> Path:
    """A SentencePiece BPE model file trained on CORPUS (deterministic: one thread, fixed data)."""
    import sentencepiece as spm

    folder.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS), model_prefix=str(folder / "spm"), vocab_size=vocab_size,
        model_type="bpe", byte_fallback=True, character_coverage=0.98, normalization_rule_name="identity",
        remove_extra_whitespaces=False, split_digits=True, user_defined_symbols=MARKERS, num_threads=1,
        minloglevel=2, hard_vocab_limit=False, allow_whitespace_only_pieces=True, add_dummy_prefix=True,
    )
    return folder / "spm.model"


def spm_vocab(model_file: Path) -> tuple[list[str], list[float], list[int], Any]:
    """(tokens, scores, token types, the processor) as llama.cpp's converter reads them."""
    import gguf
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model_file))
    tokens, scores, kinds = [], [], []
    for index in range(sp.vocab_size()):
        tokens.append(sp.id_to_piece(index))
        scores.append(sp.get_score(index))
        kind = gguf.TokenType.NORMAL
        if sp.is_unknown(index):
            kind = gguf.TokenType.UNKNOWN
        elif sp.is_control(index):
            kind = gguf.TokenType.CONTROL
        elif sp.is_unused(index):
            kind = gguf.TokenType.UNUSED
        elif sp.is_byte(index):
            kind = gguf.TokenType.BYTE
        elif tokens[-1] in MARKERS:
            kind = gguf.TokenType.USER_DEFINED
        kinds.append(int(kind))
    return tokens, scores, kinds, sp


def write_spm_gguf(out: Path, model_file: Path, *, template: str | None = TEMPLATE, seed: int = 0) -> Path:
    """A one-layer Llama with random F32 weights and the SentencePiece vocabulary of `model_file`."""
    import gguf

    tokens, scores, kinds, sp = spm_vocab(model_file)
    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name("logitscope-spm-test")
    writer.add_context_length(256)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FF)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_vocab_size(len(tokens))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(kinds)
    writer.add_bos_token_id(sp.bos_id())
    writer.add_eos_token_id(sp.eos_id())
    writer.add_unk_token_id(sp.unk_id())
    writer.add_add_bos_token(False)
    writer.add_add_space_prefix(True)
    if template is not None:
        writer.add_chat_template(template)
    for name, array in _weights(len(tokens), seed):
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _weights(vocab: int, seed: int) -> list[tuple[str, np.ndarray]]:
    """Random weights under llama.cpp's names (norms at one)."""
    rng = np.random.default_rng(seed)

    def matrix(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * 0.2).astype(np.float32)

    out = [("token_embd.weight", matrix(vocab, HIDDEN)), ("output_norm.weight", np.ones(HIDDEN, np.float32)),
           ("output.weight", matrix(vocab, HIDDEN))]
    for layer in range(LAYERS):
        out += [(f"blk.{layer}.attn_norm.weight", np.ones(HIDDEN, np.float32)),
                (f"blk.{layer}.attn_q.weight", matrix(HIDDEN, HIDDEN)),
                (f"blk.{layer}.attn_k.weight", matrix(HIDDEN, HIDDEN)),
                (f"blk.{layer}.attn_v.weight", matrix(HIDDEN, HIDDEN)),
                (f"blk.{layer}.attn_output.weight", matrix(HIDDEN, HIDDEN)),
                (f"blk.{layer}.ffn_norm.weight", np.ones(HIDDEN, np.float32)),
                (f"blk.{layer}.ffn_gate.weight", matrix(FF, HIDDEN)),
                (f"blk.{layer}.ffn_up.weight", matrix(FF, HIDDEN)),
                (f"blk.{layer}.ffn_down.weight", matrix(HIDDEN, FF))]
    return out
