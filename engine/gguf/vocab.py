"""llama.cpp's own vocabulary and metadata of a loaded model, called through llama-cpp-python's
low-level bindings: tokenize, token pieces, end-of-generation tokens, the file's metadata.

Why llama.cpp's and not a tokenizer rebuilt from the file: llama.cpp knows some forty
pre-tokenizers and every vocabulary kind a GGUF file can hold, and it is what the model was
tested with; a rebuild supported six and differed from llama.cpp on real files. Reading the few
metadata keys needed here through llama.cpp also spares parsing the whole file in Python (which
took most of a 262k-vocabulary model's load time).

Every call runs on the engine thread, like every other llama.cpp call (``engine.gguf.model``).
"""

from __future__ import annotations

import ctypes
from typing import Any

from engine.models.ggufs import FILE_TYPES

ATTR_CONTROL = 1 << 3  # llama_token_attr
GUESSED = 1024  # llama_ftype: "not specified in the model file", or-ed onto the guess


def ftype_name(ftype: int) -> str:
    """The quantization (a llama_ftype) as llama.cpp's quantize tool and the model picker name it
    ("Q4_K_M", not llama_model_desc's "Q4_K - Medium"); "?" appended when llama.cpp guessed it."""
    guessed = bool(ftype & GUESSED)
    name = FILE_TYPES.get(ftype & ~GUESSED, f"type {ftype & ~GUESSED}")
    return f"{name}?" if guessed else name


class LlamaVocab:
    """The vocabulary of one loaded llama.cpp model (`lib`: the llama_cpp module, `model`: its
    llama_model pointer, which must outlive this object)."""

    def __init__(self, lib: Any, model: Any, listed_eog: list[int] | None = None) -> None:
        """`listed_eog`: the end-of-generation ids llama.cpp's loader logged, if read (`eog_ids`)."""
        self._listed_eog = list(listed_eog or [])
        self._lib = lib
        self._model = model
        self._vocab = lib.llama_model_get_vocab(model)
        self.size = int(lib.llama_vocab_n_tokens(self._vocab))
        self._piece = ctypes.create_string_buffer(256)

    @property
    def pointer(self) -> Any:
        """llama.cpp's llama_vocab pointer (for callers comparing against llama.cpp directly)."""
        return self._vocab

    def tokenize(self, text: str, add_special: bool = False, parse_special: bool = True) -> list[int]:
        """llama.cpp's ids of `text`: special tokens in the text parsed, none added unless asked."""
        raw = text.encode("utf-8")
        room = len(raw) + 8
        out = (self._lib.llama_token * room)()
        count = self._lib.llama_tokenize(self._vocab, raw, len(raw), out, room, add_special, parse_special)
        if count < 0:  # more ids than bytes (never seen): ask again with the room it says
            room = -count
            out = (self._lib.llama_token * room)()
            count = self._lib.llama_tokenize(self._vocab, raw, len(raw), out, room, add_special, parse_special)
        return list(out[:max(count, 0)])

    def piece(self, token: int, special: bool) -> bytes:
        """One token's bytes as llama.cpp writes it (``▁`` as a space, byte tokens as their byte);
        `special`: control tokens as their text (else as nothing)."""
        size = self._lib.llama_token_to_piece(self._vocab, token, self._piece, len(self._piece), 0, special)
        if size < 0:
            self._piece = ctypes.create_string_buffer(-size)
            size = self._lib.llama_token_to_piece(self._vocab, token, self._piece, len(self._piece), 0, special)
        return self._piece.raw[:max(size, 0)]

    def attr(self, token: int) -> int:
        """llama_token_attr bits of `token`."""
        return int(self._lib.llama_vocab_get_attr(self._vocab, token))

    def is_eog(self, token: int) -> bool:
        return bool(self._lib.llama_vocab_is_eog(self._vocab, token))

    def eog_ids(self) -> list[int]:
        """Every end-of-generation id llama.cpp knows (eos, eot, eom and the tokens it recognises by
        text, e.g. ``<end_of_turn>``, ``<|im_end|>``), in id order.

        llama.cpp answers only one id at a time (``llama_vocab_is_eog``): asking for each of a
        262k vocabulary took 0.3-0.5 s of a load. Its loader logs the list, though; those ids are
        used when llama.cpp confirms each of them and they include eos and eot (else every id is
        asked, whatever a future log says)."""
        is_eog, vocab = self._lib.llama_vocab_is_eog, self._vocab
        listed = sorted({t for t in self._listed_eog if 0 <= t < self.size})
        named = [t for t in (self.special_id("eos"), self.special_id("eot")) if t is not None]
        if listed and all(is_eog(vocab, t) for t in listed) and set(named) <= set(listed):
            return listed
        return [token for token in range(self.size) if is_eog(vocab, token)]

    def special_id(self, which: str) -> int | None:
        """``bos``, ``eos``, ``eot``...: llama.cpp's id for it, None when the vocabulary has none."""
        token = int(getattr(self._lib, f"llama_vocab_{which}")(self._vocab))
        return token if 0 <= token < self.size else None

    def adds_bos(self) -> bool:
        """Whether llama.cpp puts BOS in front of a prompt it tokenizes with special tokens added."""
        return bool(self._lib.llama_vocab_get_add_bos(self._vocab))

    def meta(self, key: str) -> str | None:
        """The file's metadata value under `key` as text, None when it has none."""
        buffer = ctypes.create_string_buffer(256)
        size = self._lib.llama_model_meta_val_str(self._model, key.encode(), buffer, len(buffer))
        if size < 0:
            return None
        if size >= len(buffer):
            buffer = ctypes.create_string_buffer(size + 1)
            size = self._lib.llama_model_meta_val_str(self._model, key.encode(), buffer, len(buffer))
        return buffer.raw[:size].decode("utf-8", "replace")

    def chat_template(self) -> str | None:
        """``tokenizer.chat_template`` of the file, None when it has none."""
        raw = self._lib.llama_model_chat_template(self._model, None)
        return raw.decode("utf-8", "replace") if raw else None
