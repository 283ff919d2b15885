"""The GGUF file's own tokenizer as an ordinary fast tokenizer, so the MLX engine's prompt renderer
(``engine.local.prompt``: the chat template, the history rule, replies spliced as their ids) and its
streaming text (``engine.local.textstream``) run unchanged on a GGUF model.

Why not llama.cpp's tokenizer: the renderer needs a Hugging Face tokenizer's interface
(``apply_chat_template``, ``convert_ids_to_tokens``, mlx-lm's streaming detokenizers); and why not
transformers' own GGUF reader: it needs PyTorch. So the vocabulary, merges, special tokens and
chat template are read with the ``gguf`` package and built into a ``tokenizers`` BPE. Each load is
checked against llama.cpp's tokenizer on a probe text (`check_against`): a vocabulary this module
does not build exactly is refused in one line rather than fed ids the model would not produce.

Byte-level BPE vocabularies (``tokenizer.ggml.model = gpt2``: GPT-2, Llama 3, Qwen 2 and others)
are built here; SentencePiece ones (``llama``: Llama 2, Mistral, TinyLlama) by ``engine.gguf.spm``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.core.api import ModelLoadError

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                  r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                 r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
PATTERNS = {"gpt2": GPT2_PATTERN, "gpt-2": GPT2_PATTERN, "llama-bpe": LLAMA3_PATTERN,
            "llama3": LLAMA3_PATTERN, "qwen2": QWEN2_PATTERN, "deepseek-r1-qwen": QWEN2_PATTERN}
PROBE = "Hello, world! It's 2024: naïve café, 你好世界 🙂🚀\n\tdef f(x):  return x**2 \r\n  the cat sat"
_CONTROL, _USER_DEFINED = 3, 4  # gguf.TokenType values


def read_metadata(path: Path) -> dict[str, Any]:
    """The file's ``tokenizer.*`` and ``general.*`` keys as plain Python values."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    return {key: field.contents() for key, field in reader.fields.items()
            if key.startswith(("tokenizer.", "general.")) or key.endswith(".context_length")}


def build_tokenizer(meta: dict[str, Any], name: str) -> Any:
    """mlx-lm's TokenizerWrapper around a fast tokenizer built from `meta`. Raises ModelLoadError."""
    from mlx_lm.tokenizer_utils import BPEStreamingDetokenizer, SPMStreamingDetokenizer, TokenizerWrapper
    from transformers import PreTrainedTokenizerFast

    kind = meta.get("tokenizer.ggml.model")
    if kind not in ("gpt2", "llama"):
        raise ModelLoadError(f"{name}: its {kind!r} tokenizer is not supported yet "
                             "(byte-level BPE 'gpt2' and SentencePiece 'llama' are)")
    tokens: list[str] = list(meta["tokenizer.ggml.tokens"])
    if kind == "llama":
        from engine.gguf.spm import spm_tokenizer

        backend, detokenizer = spm_tokenizer(meta, tokens), SPMStreamingDetokenizer
    else:
        pre = str(meta.get("tokenizer.ggml.pre", "default"))
        if pre not in PATTERNS:
            raise ModelLoadError(f"{name}: its pre-tokenizer {pre!r} is not supported yet "
                                 f"({', '.join(sorted(PATTERNS))})")
        backend = _bpe(meta, tokens, PATTERNS[pre], ignore_merges=pre == "llama-bpe")
        detokenizer = BPEStreamingDetokenizer
    fast = PreTrainedTokenizerFast(tokenizer_object=backend)
    _set_specials(fast, meta, tokens)
    template = meta.get("tokenizer.chat_template")
    if isinstance(template, str):
        fast.chat_template = template
    eos = meta.get("tokenizer.ggml.eos_token_id")
    eot = meta.get("tokenizer.ggml.eot_token_id")
    stops = [int(i) for i in (eos, eot) if isinstance(i, int)]
    return TokenizerWrapper(fast, detokenizer, eos_token_ids=sorted(set(stops)) or None)


def _bpe(meta: dict[str, Any], tokens: list[str], pattern: str, ignore_merges: bool) -> Any:
    """The byte-level BPE model with its pre-tokenizer split and the special tokens added."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
    )

    kinds = list(meta.get("tokenizer.ggml.token_type", [1] * len(tokens)))
    merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges", [])]
    vocab = {text: index for index, text in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    special = [AddedToken(t, special=True, normalized=False) for t, k in zip(tokens, kinds) if k == _CONTROL]
    user = [AddedToken(t, special=False, normalized=False) for t, k in zip(tokens, kinds) if k == _USER_DEFINED]
    tok.add_special_tokens(special)
    tok.add_tokens(user)
    return tok


def _set_specials(fast: Any, meta: dict[str, Any], tokens: list[str]) -> None:
    """bos, eos and unk as the template and the renderer expect them (text, from the ids in the file)."""
    for key, attribute in (("tokenizer.ggml.bos_token_id", "bos_token"), ("tokenizer.ggml.eos_token_id", "eos_token"),
                           ("tokenizer.ggml.unknown_token_id", "unk_token")):
        index = meta.get(key)
        if isinstance(index, int) and 0 <= index < len(tokens):
            setattr(fast, attribute, tokens[index])


def check_against(tokenizer: Any, reference: Callable[[str], list[int]], name: str) -> None:
    """Refuse (one line) a tokenizer that splits the probe text unlike llama.cpp's own."""
    ours = list(tokenizer.encode(PROBE, add_special_tokens=False))
    theirs = reference(PROBE)
    if ours != theirs:
        at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        raise ModelLoadError(f"{name}: its tokenizer could not be rebuilt exactly (differs from llama.cpp's at token {at})")
