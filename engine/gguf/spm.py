"""A SentencePiece vocabulary from a GGUF file (``tokenizer.ggml.model = llama``: Llama 2, Mistral,
TinyLlama) rebuilt as a ``tokenizers`` BPE that splits text exactly as llama.cpp's SPM tokenizer.

llama.cpp's rule (``llm_tokenizer_spm``): spaces become ``▁``, each piece of text between special
tokens gets one ``▁`` in front (``add_space_prefix``), then starting from single characters the
adjacent pair whose concatenation is a token with the highest score is merged, again and again;
a character that is no token is written as its UTF-8 bytes (``<0x00>``..``<0xFF>``).

The same as a ``tokenizers`` pipeline: a ``Prepend("▁")`` + ``Replace(" ", "▁")`` normalizer (the
added tokens are cut out first, so every piece between them is prefixed, as in llama.cpp), no
pre-tokenizer (merges run across the whole piece), and a BPE whose merges are every split of
every token into two tokens, ranked by the merged token's score (highest first), with byte
fallback. Why not transformers' GGUF converter: its module moved between releases (4.x
``integrations.ggml``, 5.x ``integrations.gguf``), and its Llama tokenizer's ``Metaspace`` prefixes
only the first piece of the text, where llama.cpp prefixes every piece after a special token.
"""

from __future__ import annotations

from typing import Any

SPACE = "\u2581"
_UNKNOWN, _CONTROL, _USER_DEFINED = 2, 3, 4  # gguf.TokenType values


def spm_tokenizer(meta: dict[str, Any], tokens: list[str]) -> Any:
    """The ``tokenizers.Tokenizer`` for the SPM vocabulary in `meta` (tokens, scores, kinds)."""
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
    """Every (left, right) pair of tokens whose concatenation is a token, best merged score first.

    SPM files store no merges: llama.cpp merges the adjacent pair whose result scores highest, so
    ranking each possible merge by its result's score gives the BPE the same order. (Equal scores:
    the lower id first; llama.cpp would take the leftmost pair, which `check_against` would catch.)
    """
    known = {text: index for index, text in enumerate(tokens)}  # a repeated text: the last id's score
    ranked: list[tuple[float, int, int, str, str]] = []
    for text, index in known.items():
        for cut in range(1, len(text)):
            left, right = text[:cut], text[cut:]
            if left in known and right in known:
                ranked.append((-scores[index], index, cut, left, right))
    ranked.sort()
    return [(left, right) for _, _, _, left, right in ranked]
