"""The model's tokenizer, here on the client: so a prompt goes to the server as exact token ids
(the history rule of `engine.core.api`: each reply spliced as the ids the model wrote), and every id a
server names can be shown as text.

Loaded with `transformers` only (no MLX): from a local folder (``--tokenizer``, or the model name
when it is one) or the Hugging Face hub like any model. Rendering runs in a daemon thread with a
deadline, so a chat template that loops cannot freeze the event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from engine.core.api import EngineError, Message
from engine.core.outside_logs import route_outside_logs
from engine.local.prompt import TextEncoder, render_prompt

RENDER_DEADLINE_S = 5.0
T = TypeVar("T")


class ServerTokenizer:
    """A Hugging Face tokenizer with the two facts `engine.local.prompt` reads from mlx-lm's wrapper."""

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
        """The prompt's ids (`engine.local.prompt.render_prompt`), off the event loop, with a deadline."""
        work = in_daemon_thread(render_prompt, self, messages, continue_last, self.encode_runs)
        try:
            return await asyncio.wait_for(work, RENDER_DEADLINE_S)
        except asyncio.TimeoutError:
            raise EngineError(f"The chat template ran for over {RENDER_DEADLINE_S:g} s: the prompt "
                              "cannot be rendered here.") from None


def in_daemon_thread(function: Callable[..., T], *args: Any) -> asyncio.Future[T]:
    """`function(*args)` in a daemon thread of its own, as a future of this loop. Not
    `asyncio.to_thread`: `asyncio.run` joins the default executor's threads at exit, so a template
    that never ends (or a hub download that hangs) would hold quitting; a daemon thread does not."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():  # the caller gave up (deadline, cancel)
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result, error = function(*args), None
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine as is
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop is closed: nobody waits
            pass

    threading.Thread(target=run, name="logitscope-remote-tokenizer", daemon=True).start()
    return future


def local_tokenizer_folder(model_id: str) -> str | None:
    """Where the served model's tokenizer already is on this machine, never downloading: the id
    itself when it is a folder (a server on this machine, mlx_lm.server names a local model by its
    path), else that hub id's snapshot in the local Hugging Face cache. None when neither has one."""
    if not model_id:
        return None
    folder = Path(model_id).expanduser()
    if folder.is_dir():
        return str(folder) if _has_tokenizer(folder) else None
    if model_id.count("/") != 1 or model_id.startswith(("/", ".", "~")):
        return None  # not a hub id ("org/name"): nothing to look up
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    for name in ("tokenizer_config.json", "tokenizer.json"):
        try:
            found = try_to_load_from_cache(model_id, name)
        except Exception:  # noqa: BLE001 - a malformed id or cache: simply not here
            return None
        if isinstance(found, str):
            return str(Path(found).parent)
    return None


def _has_tokenizer(folder: Path) -> bool:
    return any((folder / name).is_file() for name in ("tokenizer_config.json", "tokenizer.json"))


def load_tokenizer(source: str) -> ServerTokenizer:
    """`source` (a folder or hub id) as a `ServerTokenizer`; raises EngineError with one line."""
    try:
        from transformers import AutoTokenizer

        route_outside_logs()  # what transformers says while loading is our one line
    except ImportError:
        raise EngineError("transformers is not installed: no local tokenizer, so no token-id prompts.") from None
    where = str(Path(source).expanduser()) if Path(source).expanduser().is_dir() else source
    try:
        return ServerTokenizer(AutoTokenizer.from_pretrained(where))
    except Exception as exc:  # noqa: BLE001 - any failure of a third-party loader is one line
        raise EngineError(f"No tokenizer at {source!r}: {type(exc).__name__}.") from None
