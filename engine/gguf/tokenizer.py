"""llama.cpp's tokenizer in the shape the MLX engine's prompt renderer and text stream expect, so
that ``engine.local.prompt`` (the chat template, the history rule: earlier replies as their exact
ids) and ``engine.local.textstream`` (the byte rule for pieces) run unchanged on a GGUF model.

Every id comes from llama.cpp itself (``engine.gguf.vocab``): text is split exactly as llama.cpp
splits it, whatever the vocabulary (every pre-tokenizer llama.cpp knows, SentencePiece, WordPiece,
...), and a token's bytes are llama.cpp's piece of it. The rules here are llama.cpp's own too:

- a reply stops at every end-of-generation token llama.cpp knows (``llama_vocab_is_eog``), not
  only at the ids the file's metadata names;
- a reply's text is its tokens' pieces joined, control tokens left out (llama.cpp's streaming
  text, ``llama_token_to_piece``): its leading space stays (" the", as the model wrote it), where
  ``llama_detokenize`` of the whole reply would strip a SentencePiece reply's first space;
- a prompt starts with BOS when llama.cpp would add one (``add_bos``) and the template did not
  write it already: never two.

The chat template is the file's ``tokenizer.chat_template``, rendered by transformers' Jinja
renderer exactly as the MLX path renders a Hugging Face tokenizer's (`render_template`).
"""

from __future__ import annotations

from typing import Any, Iterable

from engine.gguf.vocab import ATTR_CONTROL, LlamaVocab


class GgufTokenizer:
    """The tokenizer interface the engine uses (mlx-lm TokenizerWrapper's subset), backed by llama.cpp."""

    keeps_leading_space = True  # engine.local.textstream: llama.cpp's text keeps a reply's first space

    def __init__(self, vocab: LlamaVocab, chat_template: str | None) -> None:
        self.vocab = vocab
        self.chat_template = chat_template
        self.eos_token_ids = vocab.eog_ids()
        eos = vocab.special_id("eos")
        self.eos_token_id = eos if eos is not None else (self.eos_token_ids[0] if self.eos_token_ids else None)
        bos = vocab.special_id("bos")
        self._bos_text = self._text_of(bos) if bos is not None else ""
        self.bos_token = self._bos_text or None
        self.eos_token = self._text_of(self.eos_token_id) if self.eos_token_id is not None else None
        # a prompt's BOS: only where llama.cpp itself would add one
        self.bos_token_id = bos if bos is not None and vocab.adds_bos() else None

    @property
    def has_chat_template(self) -> bool:
        return bool(self.chat_template)

    def __len__(self) -> int:
        return self.vocab.size

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """llama.cpp's ids of `text`, special tokens written in it parsed (the template's markers)."""
        return self.vocab.tokenize(text, add_special=add_special_tokens)

    def encode_document(self, text: str) -> list[int]:
        """A plain text's ids as llama.cpp's perplexity tool tokenizes it (``common_tokenize(ctx,
        text, add_special=true, parse_special=false)``): BOS where the model adds one, and any
        special token's spelling in the text read as text."""
        return self.vocab.tokenize(text, add_special=True, parse_special=False)

    def piece_bytes(self, token: int) -> bytes:
        """A token's bytes for the inspector: a control token as its own text (``<end_of_turn>``)."""
        return self.vocab.piece(token, special=True) if 0 <= token < self.vocab.size else b""

    def text_bytes(self, token: int) -> bytes:
        """A token's bytes in a reply's text: a control token adds nothing (llama.cpp's rule)."""
        return self.vocab.piece(token, special=False) if 0 <= token < self.vocab.size else b""

    def decode(self, ids: Iterable[int]) -> str:
        """The reply text of `ids` (each piece joined; a lone byte as ``\\xNN``)."""
        return b"".join(self.text_bytes(int(i)) for i in ids).decode("utf-8", "backslashreplace")

    def convert_ids_to_tokens(self, ids: int | Iterable[int]) -> Any:
        """A token's text (or each of a list's), control tokens written out."""
        if isinstance(ids, int):
            return self._text_of(ids)
        return [self._text_of(int(i)) for i in ids]

    def is_control(self, token: int) -> bool:
        return bool(self.vocab.attr(token) & ATTR_CONTROL)

    def _text_of(self, token: int) -> str:
        return self.piece_bytes(token).decode("utf-8", "backslashreplace")

    def apply_chat_template(self, conversation: list[dict[str, Any]], tokenize: bool = False,
                            add_generation_prompt: bool = True, **options: Any) -> Any:
        """The file's chat template rendered for `conversation` (text; ids with `tokenize`), with
        BOS in front where llama.cpp adds one and the template did not write it."""
        if not self.chat_template:
            raise ValueError("this model has no chat template")
        text = render_template(self.chat_template, conversation, add_generation_prompt,
                               bos_token=self.bos_token or "", eos_token=self.eos_token or "", **options)
        if self.bos_token_id is not None and not text.startswith(self._bos_text):
            text = self._bos_text + text
        return self.encode(text) if tokenize else text


def render_template(template: str, conversation: list[dict[str, Any]], add_generation_prompt: bool,
                    **variables: Any) -> str:
    """`template` rendered by transformers' chat-template renderer (its sandboxed Jinja, its
    ``raise_exception``, ``strftime_now`` and ``tojson``), as a Hugging Face tokenizer would."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered = render_jinja_template(conversations=[conversation], chat_template=template,
                                     add_generation_prompt=add_generation_prompt, **variables)[0]
    return str(rendered[0])
