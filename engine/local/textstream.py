"""Turning generated ids into text two ways: the reply as it streams, and each token on its own.

`ReplyText` streams the reply: a token yields only the text it *completes*, so a character split
over several byte tokens (emoji, CJK) appears whole, once, never as mojibake. `PieceCache` renders
a single token for the inspector (the candidates list, the token under the cursor): there a token
holding half a character is shown honestly as its bytes, e.g. ``\\xe4\\xbd``. Both write a byte that
is part of no character the same way, ``\\x9d``, so one token reads the same in the reply, the
panel and `logitscope run`'s output.

No MLX here; only the tokenizer. `tokenizer` is mlx-lm's `TokenizerWrapper`.
"""

from __future__ import annotations

import codecs
from typing import Any, Callable, Iterable

from mlx_lm.tokenizer_utils import BPEStreamingDetokenizer, SPMStreamingDetokenizer

_SPM_SPACE = "\u2581".encode("utf-8")


class ReplyText:
    """The streamed text of one reply (a continued reply is primed with the ids it already has).

    One rule for bytes, the same as `PieceCache`'s: the reply's text is the UTF-8 decoding of
    all its tokens' bytes, where a byte that is part of no character is written ``\\x9d``. Such a
    byte shows at the token that holds it (mlx-lm's detokenizers held it back and then wrote a
    bare U+FFFD into the *next* token's text, while the candidates panel showed ``\\x9d``); a
    character split over byte tokens shows whole, once, at the token that completes it.
    """

    def __init__(self, tokenizer: Any, prefix_ids: Iterable[int] = ()) -> None:
        """Priming with the prefix lets a split character that spans prefix and reply join up."""
        self._stream = _ByteStream(tokenizer) if _reads_bytes(tokenizer) else _MlxStream(tokenizer)
        for token_id in prefix_ids:
            self._stream.add(token_id)
        self._stream.segment()  # the prefix was shown before; only new text streams

    def add(self, token_id: int) -> str:
        """Add one token; returns the text it completes ("" while a character is still split)."""
        self._stream.add(token_id)
        return self._stream.segment()

    def flush(self) -> str:
        """Finish the stream and return only the text still held back (a preview's last piece)."""
        self._stream.finalize()
        return self._stream.segment()

    def finish(self) -> str:
        """Flush what was held back and return the whole reply's text (prefix included)."""
        self._stream.finalize()
        return self._stream.text


class _ByteStream:
    """Byte-exact streaming for vocabularies that say which bytes each token holds.

    Python's incremental UTF-8 decoder holds back only bytes that may still begin a character
    and writes any other byte at once with ``backslashreplace``: the form `PieceCache` uses.
    Leading spaces go as in mlx-lm's detokenizers, so the text matches theirs wherever the
    bytes are valid UTF-8: SentencePiece drops one from each token's text while the reply has
    none yet (unless told to keep them); byte-level BPE drops one, once.
    """

    def __init__(self, tokenizer: Any) -> None:
        self._to_bytes = _byte_reader(tokenizer, in_text=True)
        detokenizer = getattr(tokenizer, "detokenizer", None)
        self._once = isinstance(detokenizer, BPEStreamingDetokenizer)
        self._trim = self._once or bool(getattr(detokenizer, "trim_space", True))
        if getattr(tokenizer, "keeps_leading_space", False):  # llama.cpp's text (engine.gguf.tokenizer)
            self._trim = False
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="backslashreplace")
        self.text = ""
        self._shown = 0  # how much of `text` earlier segments returned

    def add(self, token_id: int) -> None:
        self._append(self._decoder.decode(self._to_bytes(token_id)))

    def finalize(self) -> None:
        self._append(self._decoder.decode(b"", final=True))

    def segment(self) -> str:
        """The text added since the last call."""
        new, self._shown = self.text[self._shown:], len(self.text)
        return new

    def _append(self, text: str) -> None:
        if self._trim and not self.text and text.startswith(" "):
            text = text[1:]
            self._trim = not self._once
        self.text += text


class _MlxStream:
    """mlx-lm's own streaming detokenizer, for tokenizers whose bytes cannot be read per token."""

    def __init__(self, tokenizer: Any) -> None:
        self._detokenizer = tokenizer.detokenizer  # a fresh copy per reply

    @property
    def text(self) -> str:
        return str(self._detokenizer.text)

    def add(self, token_id: int) -> None:
        self._detokenizer.add_token(token_id)

    def finalize(self) -> None:
        self._detokenizer.finalize()

    def segment(self) -> str:
        return str(self._detokenizer.last_segment)


def _reads_bytes(tokenizer: Any) -> bool:
    """Whether each token's bytes are known exactly (byte-level BPE, SentencePiece, or a
    tokenizer that says them itself: llama.cpp's, `engine.gguf.tokenizer`)."""
    return hasattr(tokenizer, "piece_bytes") or isinstance(
        tokenizer.detokenizer, (BPEStreamingDetokenizer, SPMStreamingDetokenizer))


class PieceCache:
    """Display text of single tokens, computed once per id (the vocabulary is reused constantly)."""

    def __init__(self, tokenizer: Any) -> None:
        """The tokenizer's kind decides once how bytes are read (see `_byte_reader`)."""
        self._to_bytes = _byte_reader(tokenizer)
        self._pieces: dict[int, str] = {}

    def token_bytes(self, token_id: int) -> bytes:
        """The token's raw bytes (what DRY's sequence breakers are matched against)."""
        return self._to_bytes(token_id)

    def __call__(self, token_id: int) -> str:
        """The token alone; bytes that are not a whole UTF-8 character show as ``\\xNN``."""
        piece = self._pieces.get(token_id)
        if piece is None:
            piece = self._to_bytes(token_id).decode("utf-8", errors="backslashreplace")
            self._pieces[token_id] = piece
        return piece


def _byte_reader(tokenizer: Any, in_text: bool = False) -> Callable[[int], bytes]:
    """How to get one token's raw bytes for this kind of tokenizer.

    A tokenizer that says each token's bytes itself (llama.cpp's, `engine.gguf.tokenizer`) is
    asked: `in_text` (a reply's text) leaves control tokens out, as llama.cpp's text does, while
    the inspector shows them by name. Byte-level BPE and SentencePiece vocabularies say exactly
    which bytes a token holds; for any other tokenizer, decoding the id alone is the best
    available answer.
    """
    if hasattr(tokenizer, "piece_bytes"):
        return tokenizer.text_bytes if in_text else tokenizer.piece_bytes
    detokenizer = tokenizer.detokenizer
    size = len(tokenizer)
    if isinstance(detokenizer, BPEStreamingDetokenizer):
        tokens, table = detokenizer.tokenmap, _byte_decoder()
        return lambda i: _bpe_bytes(tokens[i], table) if 0 <= i < size else b""
    if isinstance(detokenizer, SPMStreamingDetokenizer):
        spm: list[bytes] = detokenizer.tokenmap
        return lambda i: spm[i].replace(_SPM_SPACE, b" ") if 0 <= i < size else b""
    return lambda i: tokenizer.decode([i]).encode("utf-8") if 0 <= i < size else b""


def _bpe_bytes(token: str, table: dict[str, int]) -> bytes:
    """A byte-level BPE token string back to its bytes (GPT-2's printable-byte alphabet)."""
    out = bytearray()
    for char in token:
        value = table.get(char)
        if value is None:
            out.extend(char.encode("utf-8"))  # added tokens are stored as plain text
        else:
            out.append(value)
    return bytes(out)


def _byte_decoder() -> dict[str, int]:
    """GPT-2's map from printable stand-in characters to byte values (the inverse of its encoder)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}
