"""A GGUF file's vocabulary rebuilt as a ``tokenizers`` tokenizer (tokenizer.json), from its metadata.

Why: an MLX model folder made from a GGUF file (`engine.gguf.to_mlx`, ``logitscope convert``) needs
the tokenizer files mlx-lm and transformers load, and the file stores only its vocabulary, merges,
token kinds and the name of llama.cpp's pre-tokenizer split. Byte-level BPE vocabularies
(``tokenizer.ggml.model = gpt2``: GPT-2, SmolLM, Llama 3, Qwen 2) are built here with llama.cpp's
split for their ``tokenizer.ggml.pre`` (the regular expressions of ``llama-vocab.cpp``, applied in
order); SentencePiece ones (``llama``: Llama 2, Mistral, Gemma) as llama.cpp's SPM tokenizer
splits them (`sentencepiece`). A split not listed here is refused in one line; whoever converts checks the result against llama.cpp's own
tokenizer on a probe text (the tests do, and so does ``logitscope convert``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.core.api import ModelLoadError

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                  r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                 r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
DIGIT = r"\p{N}"
# tokenizer.ggml.pre -> the splits llama.cpp applies in order (its LLAMA_VOCAB_PRE_TYPE_* cases)
SPLITS: dict[str, tuple[str, ...]] = {
    "gpt-2": (GPT2_PATTERN,), "mpt": (GPT2_PATTERN,), "olmo": (GPT2_PATTERN,),
    "smollm": (DIGIT, GPT2_PATTERN), "starcoder": (DIGIT, GPT2_PATTERN), "refact": (DIGIT, GPT2_PATTERN),
    "codeshell": (DIGIT, GPT2_PATTERN), "command-r": (DIGIT, GPT2_PATTERN),
    "llama-bpe": (LLAMA3_PATTERN,), "llama3": (LLAMA3_PATTERN,), "dbrx": (LLAMA3_PATTERN,), "smaug-bpe": (LLAMA3_PATTERN,),
    "qwen2": (QWEN2_PATTERN,), "deepseek-r1-qwen": (QWEN2_PATTERN,), "stablelm2": (QWEN2_PATTERN,),
}
IGNORE_MERGES = ("llama-bpe", "llama3")  # Llama 3's tokenizer.json takes whole-word tokens before merging
_UNKNOWN, _CONTROL, _USER_DEFINED = 2, 3, 4  # gguf.TokenType values
SPACE = "\u2581"


def backend(meta: dict[str, Any], name: str) -> Any:
    """The ``tokenizers.Tokenizer`` for the vocabulary in `meta` (the file's ``tokenizer.*`` keys).
    Raises ModelLoadError (one line) for a vocabulary or split it does not build."""
    kind = meta.get("tokenizer.ggml.model")
    tokens: list[str] = list(meta.get("tokenizer.ggml.tokens") or [])
    if not tokens:
        raise ModelLoadError(f"{name}: the file holds no vocabulary (tokenizer.ggml.tokens)")
    if kind == "llama":
        return sentencepiece(meta, tokens)
    if kind != "gpt2":
        raise ModelLoadError(f"{name}: its {kind!r} tokenizer is not supported yet "
                             "(byte-level BPE 'gpt2' and SentencePiece 'llama' are)")
    pre = str(meta.get("tokenizer.ggml.pre", "default"))
    if pre not in SPLITS:
        raise ModelLoadError(f"{name}: its pre-tokenizer {pre!r} is not supported yet ({', '.join(sorted(SPLITS))})")
    return byte_level(meta, tokens, SPLITS[pre], ignore_merges=pre in IGNORE_MERGES)


def byte_level(meta: dict[str, Any], tokens: list[str], splits: tuple[str, ...], ignore_merges: bool) -> Any:
    """The byte-level BPE model with llama.cpp's splits (in order) and the special tokens added."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    kinds = list(meta.get("tokenizer.ggml.token_type", [1] * len(tokens)))
    merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges", [])]
    vocab = {text: index for index, text in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        *(pre_tokenizers.Split(Regex(pattern), behavior="isolated") for pattern in splits),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    special = [AddedToken(t, special=True, normalized=False) for t, k in zip(tokens, kinds) if k == _CONTROL]
    user = [AddedToken(t, special=False, normalized=False) for t, k in zip(tokens, kinds) if k == _USER_DEFINED]
    tok.add_special_tokens(special)
    tok.add_tokens(user)
    return tok


def sentencepiece(meta: dict[str, Any], tokens: list[str]) -> Any:
    """The SPM vocabulary in `meta` (tokens, scores, kinds) as a ``tokenizers`` BPE that splits
    text as llama.cpp's ``llm_tokenizer_spm``: spaces become ``▁``, each piece of text between
    special tokens gets one ``▁`` in front (``add_space_prefix``), then the adjacent pair whose
    concatenation is the highest-scoring token is merged, again and again; a character that is
    no token is written as its UTF-8 bytes (``<0x00>``..``<0xFF>``). As a pipeline: a
    ``Prepend("▁")`` + ``Replace(" ", "▁")`` normalizer (added tokens are cut out first, so every
    piece between them is prefixed, as in llama.cpp), no pre-tokenizer, and a BPE whose merges are
    every split of every token into two tokens ranked by the merged token's score, with byte fallback.
    (transformers' Llama ``Metaspace`` prefixes only the first piece of the text.)"""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers

    scores = [float(s) for s in meta.get("tokenizer.ggml.scores", [0.0] * len(tokens))]
    kinds = list(meta.get("tokenizer.ggml.token_type", [1] * len(tokens)))
    vocab = {text: index for index, text in enumerate(tokens)}  # a repeated text: the last id, as llama.cpp
    unknown = meta.get("tokenizer.ggml.unknown_token_id")
    unk = tokens[unknown] if isinstance(unknown, int) and 0 <= unknown < len(tokens) else None
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges_from_scores(tokens, scores), unk_token=unk,
                               fuse_unk=True, byte_fallback=True))
    prefix = bool(meta.get("tokenizer.ggml.add_space_prefix", True))
    tok.normalizer = normalizers.Sequence([*([normalizers.Prepend(SPACE)] if prefix else []),
                                           normalizers.Replace(" ", SPACE)])
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                     *([decoders.Strip(" ", 1, 0)] if prefix else [])])
    # llama.cpp cuts control and unknown tokens out of the text (special tokens parsed), and
    # user-defined ones always: the same tokens are added here, matched before normalizing.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, k in zip(tokens, kinds) if k in (_CONTROL, _UNKNOWN)])
    tok.add_tokens([AddedToken(t, special=False, normalized=False)
                    for t, k in zip(tokens, kinds) if k == _USER_DEFINED])
    return tok


def merges_from_scores(tokens: list[str], scores: list[float]) -> list[tuple[str, str]]:
    """Every (left, right) pair of tokens whose concatenation is a token, best merged score first
    (SPM files store no merges; equal scores: the lower id first, where llama.cpp takes the
    leftmost pair, which the probe check against llama.cpp catches)."""
    known = {text: index for index, text in enumerate(tokens)}  # a repeated text: the last id's score
    ranked: list[tuple[float, int, int, str, str]] = []
    for text, index in known.items():
        for cut in range(1, len(text)):
            left, right = text[:cut], text[cut:]
            if left in known and right in known:
                ranked.append((-scores[index], index, cut, left, right))
    ranked.sort()
    return [(left, right) for _, _, _, left, right in ranked]


def special_texts(meta: dict[str, Any]) -> dict[str, str]:
    """bos, eos and unk as texts (from the ids in the file), under transformers' names."""
    tokens = meta.get("tokenizer.ggml.tokens") or []
    out = {}
    for key, attribute in (("tokenizer.ggml.bos_token_id", "bos_token"), ("tokenizer.ggml.eos_token_id", "eos_token"),
                           ("tokenizer.ggml.unknown_token_id", "unk_token")):
        index = meta.get(key)
        if isinstance(index, int) and 0 <= index < len(tokens):
            out[attribute] = tokens[index]
    return out


def write_tokenizer(meta: dict[str, Any], folder: Path, name: str) -> None:
    """tokenizer.json, tokenizer_config.json (bos, eos, unk, whether bos is added) and, when the
    file has one, chat_template.jinja, as transformers and mlx-lm read them."""
    backend(meta, name).save(str(folder / "tokenizer.json"))
    settings: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast", **special_texts(meta),
                                "add_bos_token": bool(meta.get("tokenizer.ggml.add_bos_token", False)),
                                "clean_up_tokenization_spaces": False}
    (folder / "tokenizer_config.json").write_text(json.dumps(settings, indent=1, ensure_ascii=False), encoding="utf-8")
    template = meta.get("tokenizer.chat_template")
    if isinstance(template, str):
        (folder / "chat_template.jinja").write_text(template, encoding="utf-8")
