"""A conversation as a file of its own: written atomically, read back only from a regular file,
checked whole (`engine.core.chat.fileformat`).

The library (`engine.core.library`) is where chats are kept; files are for `logitscope
export`/`import`, and for the rescue: when the library cannot take a chat (locked, read-only,
damaged, a full disk) the app writes it to `RESCUE_FOLDER` in its state folder instead of losing
it, and the next start takes every file there into the library (`engine.core.library.legacy`)."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import TextIO

from engine.core import strictjson
from engine.core.chat.conversation import Conversation
from engine.core.chat.fileformat import conversation_from_dict, conversation_to_dict
from engine.core.regular import NotRegularFile, open_regular

RESCUE_FOLDER = "conversations"  # chats the library could not take; imported into it at the next start
MAX_FILE_BYTES = 256 * 1024 * 1024  # a saved chat is megabytes; anything far bigger is not one


def save_conversation(conversation: Conversation, path: Path) -> None:
    """JSON via a uniquely named temporary file and `os.replace`: the old file or the new one,
    never half, and no temporary left behind when the disk is full. The target is only ever
    renamed over, never opened, so a FIFO there cannot block quitting.

    ``json.dumps`` then one write, not ``json.dump``: dump streams through json's pure-Python
    encoder, which took seconds at quit for a 2,000-message chat; dumps uses the C one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = strictjson.dumps(conversation_to_dict(conversation), ensure_ascii=False)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".conversation-", suffix=".json.tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            write_text(handle, text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(handle: TextIO, text: str) -> None:
    """The one write of a save: where a full disk makes it fail (and where tests fill the disk)."""
    handle.write(text)


def load_conversation(path: Path) -> Conversation:
    """The inverse of `save_conversation`: OSError if unreadable, ValueError for anything else
    wrong (one line naming the first problem). Only a regular file is opened: opening a FIFO
    would wait for a writer forever."""
    try:
        handle = open_regular(path)
    except NotRegularFile as exc:
        raise ValueError(exc.strerror) from None
    with handle:
        info = os.fstat(handle.fileno())
        if info.st_size > MAX_FILE_BYTES:
            raise ValueError(f"too big for a saved conversation ({info.st_size // 2**20} MiB)")
        raw = handle.read()
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise ValueError("nested too deeply to be a saved conversation") from None
    try:
        return conversation_from_dict(data)
    except ValueError as exc:
        raise ValueError(f"not a saved conversation: {exc}") from None


def save_copy(conversation: Conversation, folder: Path) -> Path:
    """Keep `conversation` in a file of its own in `folder` (a new name each time, never
    overwriting); returns the path. OSError if it cannot be written. The app's rescue when the
    library fails (`RESCUE_FOLDER`)."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        path = folder / (f"conversation-{stamp}" + (f"-{n}" if n else "") + ".json")
        if not path.exists():
            save_conversation(conversation, path)
            return path
    raise OSError(f"no free file name in {folder}")
