"""Replies that hold byte tokens, made by the real text mechanism (`engine.local.textstream`) from a
real byte-level tokenizer, for the tests that check one reply reads the same everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mlx_lm.utils import load_tokenizer

from engine.core.api import Candidate, TokenEvent, TurnFinished
from engine.local.textstream import PieceCache, ReplyText


def byte_id(tokenizer: Any, value: int) -> int:
    """The id of the token holding just the byte `value` (shown as its escape, e.g. ``\\x9d``)."""
    pieces = PieceCache(tokenizer)
    return next(i for i in range(len(tokenizer)) if pieces(i) == f"\\x{value:02x}")


def byte_reply(model: Path, parts: list[str | int]) -> tuple[list[TokenEvent], TurnFinished]:
    """A reply of `parts` (text encoded as the tokenizer would, an int as that single byte's
    token), as the engine would send it: each event's text from `ReplyText`, its piece and its
    candidates' texts from `PieceCache`; the turn's text is what `ReplyText.finish` returns."""
    tokenizer = load_tokenizer(model)
    ids: list[int] = []
    for part in parts:
        ids.extend([byte_id(tokenizer, part)] if isinstance(part, int) else tokenizer.encode(part, add_special_tokens=False))
    stream, pieces = ReplyText(tokenizer), PieceCache(tokenizer)
    events = [TokenEvent(index=n, id=i, text=stream.add(i), piece=pieces(i), logprob=-0.1, sampled_prob=0.9,
                         rank=1, entropy=0.5, candidates=(Candidate(i, pieces(i), -0.1, 0.9),
                                                          Candidate(i + 1, pieces(i + 1), -2.5, 0.1)))
              for n, i in enumerate(ids)]
    done = TurnFinished(prompt_ids=(1, 2), prompt_tokens=2, reused_tokens=0, prefilled_tokens=2,
                        generated_tokens=len(ids), token_ids=tuple(ids), text=stream.finish(), ttft_s=0.01,
                        prefill_tps=100.0, decode_tps=100.0, finish_reason="length", context_used=2 + len(ids),
                        context_limit=512)
    return events, done


def build_spm_tokenizer(folder: Path, trim_space: bool = True) -> Path:
    """A tiny SentencePiece-style tokenizer (Llama's layout): ``▁`` for a space, byte fallback
    to ``<0xNN>`` tokens for anything not in its few pieces. Without `trim_space` its decoder
    keeps a leading space (mlx-lm then streams with ``trim_space=False``)."""
    from tokenizers import Tokenizer, decoders, models, normalizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2} | {f"<0x{b:02X}>": 3 + b for b in range(256)}
    for piece in ["▁", *"abcdefghijklmnopqrstuvwxyz", "▁t", "he", "▁the", ".", ","]:
        vocab.setdefault(piece, len(vocab))
    tok = Tokenizer(models.BPE(vocab, [("▁", "t"), ("h", "e"), ("▁t", "he")], unk_token="<unk>",
                               byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    tok.decoder = decoders.Sequence(steps + ([decoders.Strip(" ", 1, 0)] if trim_space else []))
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                            unk_token="<unk>").save_pretrained(str(folder))
    return folder
