"""The model's tokenizer, here on the client: so a prompt goes to the server as exact token ids
(the history rule of `engine.api`: each reply spliced as the ids the model wrote), and every id a
server names can be shown as text.

Loaded with `transformers` only (no MLX): from a local folder (``--tokenizer``, or the model name
when it is one) or the Hugging Face hub like any model. Rendering runs in a worker thread with a
deadline, so a chat template that loops cannot freeze the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.api import EngineError, Message
from engine.prompt import TextEncoder, render_prompt

RENDER_DEADLINE_S = 5.0


class ServerTokenizer:
    """A Hugging Face tokenizer with the two facts `engine.prompt` reads from mlx-lm's wrapper."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self.has_chat_template = bool(getattr(tokenizer, "chat_template", None))
        eos = getattr(tokenizer, "eos_token_id", None)
        self.eos_token_ids = [eos] if isinstance(eos, int) else []
        self.encode_runs = TextEncoder(self)  # remembers the conversation's text runs between turns

    def __len__(self) -> int:
        """The vocabulary's size, added tokens included."""
        return len(self._tokenizer)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)

    def text_of(self, token_id: int) -> str:
        """One id as text, for a candidate the server named by id only."""
        try:
            return str(self._tokenizer.decode([token_id]))
        except Exception:  # noqa: BLE001 - an id the tokenizer lacks: shown as such, not a crash
            return f"<id {token_id}>"

    def texts(self, ids: Sequence[int | None]) -> list[str]:
        """What each id adds to the reply's text, decoded as a whole (a character split over ids
        goes with the id that completes it), for a server that sends ids without text."""
        out, before = [], ""
        for end in range(1, len(ids) + 1):
            now = str(self._tokenizer.decode([i for i in ids[:end] if i is not None]))
            if now.endswith("\ufffd") and end < len(ids):
                out.append("")  # part of a character: its text comes with the id that completes it
                continue
            out.append(now.removeprefix(before))
            before = now
        return out

    async def render(self, messages: Sequence[Message], continue_last: bool) -> list[int]:
        """The prompt's ids (`engine.prompt.render_prompt`), off the event loop, with a deadline."""
        work = asyncio.to_thread(render_prompt, self, messages, continue_last, self.encode_runs)
        try:
            return await asyncio.wait_for(work, RENDER_DEADLINE_S)
        except asyncio.TimeoutError:
            raise EngineError(f"The chat template ran for over {RENDER_DEADLINE_S:.0f} s: the prompt "
                              "cannot be rendered here.") from None


def load_tokenizer(source: str) -> ServerTokenizer:
    """`source` (a folder or hub id) as a `ServerTokenizer`; raises EngineError with one line."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise EngineError("transformers is not installed: no local tokenizer, so no token-id prompts.") from None
    where = str(Path(source).expanduser()) if Path(source).expanduser().is_dir() else source
    try:
        return ServerTokenizer(AutoTokenizer.from_pretrained(where))
    except Exception as exc:  # noqa: BLE001 - any failure of a third-party loader is one line
        raise EngineError(f"No tokenizer at {source!r}: {type(exc).__name__}.") from None
