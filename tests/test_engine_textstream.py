"""Streaming text never shows a broken character; single-token pieces show their bytes honestly."""

from __future__ import annotations

import re
from pathlib import Path

from mlx_lm.utils import load_tokenizer

from engine.textstream import PieceCache, ReplyText

SAMPLE = "hi 😀 the 世界 café, こんにちは 🚀!"


def test_split_characters_appear_whole_and_once(chatml_model: Path) -> None:
    tok = load_tokenizer(chatml_model)
    ids = tok.encode(SAMPLE, add_special_tokens=False)
    assert len(ids) > len(SAMPLE.split())  # several characters span more than one token
    stream = ReplyText(tok)
    segments = [stream.add(i) for i in ids]
    assert "" in segments  # some tokens complete no character yet
    assert all("\ufffd" not in s for s in segments)
    text = stream.finish()
    assert text == SAMPLE == tok.decode(ids)
    assert text.startswith("".join(segments))  # the stream is a prefix; finish() flushes the rest


def test_a_primed_reply_streams_only_new_text(chatml_model: Path) -> None:
    tok = load_tokenizer(chatml_model)
    ids = tok.encode(SAMPLE, add_special_tokens=False)
    cut = next(i for i in range(1, len(ids)) if "\ufffd" in tok.decode(ids[:i]))  # inside the emoji
    stream = ReplyText(tok, ids[:cut])
    new = "".join(stream.add(i) for i in ids[cut:])
    assert "\ufffd" not in new
    assert stream.finish() == SAMPLE
    assert SAMPLE.endswith(new)


def test_pieces_show_partial_characters_as_bytes(chatml_model: Path) -> None:
    tok = load_tokenizer(chatml_model)
    pieces = PieceCache(tok)
    ids = tok.encode(SAMPLE, add_special_tokens=False)
    shown = [pieces(i) for i in ids]
    assert all("\ufffd" not in p for p in shown)
    partial = [p for p in shown if "\\x" in p]
    assert partial, "the emoji should be split over byte tokens"
    assert b"".join(_unescape(p) for p in shown) == SAMPLE.encode("utf-8")  # the escapes are the real bytes
    whole = [i for i, p in zip(ids, shown) if "\\x" not in p]
    assert all(pieces(i) == tok.decode([i]) for i in whole)
    assert pieces(tok.convert_tokens_to_ids("<|im_end|>")) == "<|im_end|>"
    assert pieces(10**6) == ""  # ids beyond the tokenizer (padded vocabularies) show nothing


def _unescape(piece: str) -> bytes:
    """A displayed piece back to bytes: text as UTF-8, each \\xNN escape as its byte."""
    parts = re.split(r"(\\x[0-9a-f]{2})", piece)
    return b"".join(bytes([int(p[2:], 16)]) if re.fullmatch(r"\\x[0-9a-f]{2}", p) else p.encode() for p in parts)
