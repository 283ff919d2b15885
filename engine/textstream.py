"""Turning generated ids into text two ways: the reply as it streams, and each token on its own.

`ReplyText` wraps mlx-lm's streaming detokenizer: a token yields only the text it *completes*, so
a character split over several byte tokens (emoji, CJK) appears whole, once, never as mojibake.
`PieceCache` renders a single token for the inspector (the candidates list, the token under the
cursor): there a token holding half a character is shown honestly as its bytes, e.g. ``\\xe4\\xbd``.

No MLX here; only the tokenizer. `tokenizer` is mlx-lm's `TokenizerWrapper`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from mlx_lm.tokenizer_utils import BPEStreamingDetokenizer, SPMStreamingDetokenizer

_SPM_SPACE = "\u2581".encode("utf-8")


class ReplyText:
    """The streamed text of one reply (a continued reply is primed with the ids it already has)."""

    def __init__(self, tokenizer: Any, prefix_ids: Iterable[int] = ()) -> None:
        """Priming with the prefix lets a split character that spans prefix and reply join up."""
        self._detokenizer = tokenizer.detokenizer  # a fresh copy per reply
        for token_id in prefix_ids:
            self._detokenizer.add_token(token_id)
        _ = self._detokenizer.last_segment  # the prefix was shown before; only new text streams

    def add(self, token_id: int) -> str:
        """Add one token; returns the text it completes ("" while a character is still split)."""
        self._detokenizer.add_token(token_id)
        return self._detokenizer.last_segment

    def flush(self) -> str:
        """Finish the stream and return only the text still held back (a preview's last piece)."""
        self._detokenizer.finalize()
        return str(self._detokenizer.last_segment)

    def finish(self) -> str:
        """Flush what was held back and return the whole reply's text (prefix included)."""
        self._detokenizer.finalize()
        return self._detokenizer.text


class PieceCache:
    """Display text of single tokens, computed once per id (the vocabulary is reused constantly)."""

    def __init__(self, tokenizer: Any) -> None:
        """The tokenizer's kind decides once how bytes are read (see `_byte_reader`)."""
        self._to_bytes = _byte_reader(tokenizer)
        self._pieces: dict[int, str] = {}

    def __call__(self, token_id: int) -> str:
        """The token alone; bytes that are not a whole UTF-8 character show as ``\\xNN``."""
        piece = self._pieces.get(token_id)
        if piece is None:
            piece = self._to_bytes(token_id).decode("utf-8", errors="backslashreplace")
            self._pieces[token_id] = piece
        return piece


def _byte_reader(tokenizer: Any) -> Callable[[int], bytes]:
    """How to get one token's raw bytes for this kind of tokenizer.

    Byte-level BPE and SentencePiece vocabularies say exactly which bytes a token holds; for any
    other tokenizer, decoding the id alone is the best available answer.
    """
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
