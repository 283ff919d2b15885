"""Streaming text never shows a broken character; single-token pieces show their bytes honestly."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

from byte_replies import build_spm_tokenizer, byte_id, byte_reply
from mlx_lm.tokenizer_utils import BPEStreamingDetokenizer, SPMStreamingDetokenizer
from mlx_lm.utils import load_tokenizer

from engine.local.textstream import PieceCache, ReplyText

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


def test_a_byte_that_is_no_character_reads_as_its_byte_in_the_reply(chatml_model: Path) -> None:
    """One rule for bytes (#16.9): a byte that is part of no character is written ``\\x9d`` in
    the reply's text, as its piece is, at the token that holds it; never a bare U+FFFD, never
    moved into the next token's text. A reply cut after a leading byte ends in that byte's
    escape too."""
    tok = load_tokenizer(chatml_model)
    pieces = PieceCache(tok)
    stray, lead = byte_id(tok, 0x9D), byte_id(tok, 0xC3)
    ok = tok.encode("ok", add_special_tokens=False)
    ids = [*ok, stray, *tok.encode(" then", add_special_tokens=False), lead]
    stream = ReplyText(tok)
    texts = [stream.add(i) for i in ids]
    assert texts[len(ok)] == "\\x9d" == pieces(stray)
    assert texts[-1] == ""  # a leading byte waits: the next token may complete its character
    assert stream.finish() == "ok\\x9d then\\xc3" == "".join(texts) + pieces(lead)


def test_a_split_character_is_whole_in_the_reply_and_bytes_in_its_pieces(chatml_model: Path) -> None:
    tok = load_tokenizer(chatml_model)
    events, done = byte_reply(chatml_model, ["caf", 0xC3, 0xA9, " ok"])
    first = next(n for n, e in enumerate(events) if e.piece == "\\xc3")
    assert [e.piece for e in events[first:first + 2]] == ["\\xc3", "\\xa9"]
    assert [e.text for e in events[first:first + 2]] == ["", "é"]  # once, whole, where it is complete
    assert done.text == "café ok" == "".join(e.text for e in events) == tok.decode(list(done.token_ids))


def _tokenizers(chatml_model: Path, tmp_path: Path) -> list[Any]:
    """A byte-level BPE, and SentencePiece-style ones with and without the leading-space trim."""
    return [load_tokenizer(chatml_model),
            load_tokenizer(build_spm_tokenizer(tmp_path / "spm")),
            load_tokenizer(build_spm_tokenizer(tmp_path / "spm-keep", trim_space=False))]


def test_reply_text_is_mlx_lms_wherever_the_bytes_are_valid(chatml_model: Path, tmp_path: Path) -> None:
    """The byte-exact stream writes what mlx-lm's detokenizers write for valid UTF-8 (the leading
    space trimmed as theirs is, or kept), primed or not; it differs only where they wrote U+FFFD."""
    rng = random.Random(5)
    words = ["the", "café", "😀", "世界", " ", "tea.", "\n", "a,b", " the"]
    for tok in _tokenizers(chatml_model, tmp_path):
        assert isinstance(tok.detokenizer, (BPEStreamingDetokenizer, SPMStreamingDetokenizer))
        for _ in range(40):
            text = "".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
            ids = tok.encode(text, add_special_tokens=False)
            cut = rng.randint(0, len(ids))
            ours, theirs = ReplyText(tok, ids[:cut]), tok.detokenizer
            for i in ids[:cut]:
                theirs.add_token(i)
            _ = theirs.last_segment
            streamed = "".join(ours.add(i) for i in ids[cut:])
            for i in ids[cut:]:
                theirs.add_token(i)
            theirs.finalize()
            assert ours.finish() == theirs.text, (text, cut)
            assert theirs.text.endswith(streamed)


def test_sentencepiece_byte_tokens_follow_the_same_rule(tmp_path: Path) -> None:
    tok = load_tokenizer(build_spm_tokenizer(tmp_path / "spm"))
    pieces = PieceCache(tok)
    stray, lead, tail = (tok.convert_tokens_to_ids(f"<0x{b:02X}>") for b in (0x9D, 0xC3, 0xA9))
    ids = [*tok.encode("the", add_special_tokens=False), stray, lead, tail, lead]
    stream = ReplyText(tok)
    texts = [stream.add(i) for i in ids]
    assert texts[-4:] == ["\\x9d", "", "é", ""] and [pieces(i) for i in ids[-4:]] == ["\\x9d", "\\xc3", "\\xa9", "\\xc3"]
    assert stream.finish() == "the\\x9dé\\xc3"
