"""The unsent message, kept across quitting (#30.6): a half-written question is the user's work.

Written to the state folder when the app quits with text in the input (removed when it quits
with none), read back into the input at the next start. Atomic like the conversation file (a
temporary renamed over), and read only from a regular file of bounded size: a FIFO or a huge
file there must not hang or flood the start.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

DRAFT_FILE = "draft.txt"
MAX_DRAFT_BYTES = 1_000_000  # a draft is typed or pasted text; more is not a draft


def draft_path(save_dir: Path) -> Path:
    return save_dir / DRAFT_FILE


def save_draft(text: str, path: Path) -> None:
    """Keep `text` (OSError if the disk refuses); an empty draft removes the file."""
    if not text.strip():
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".draft-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_draft(path: Path) -> str:
    """The kept draft, "" when there is none or it cannot be read as one (never raises)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_DRAFT_BYTES:
            return ""
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(MAX_DRAFT_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
