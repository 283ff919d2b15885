"""The one-time import of the chats saved before the library: `last-conversation.json` and the
kept copies in `conversations/*.json` (the state folder). Done once per library (a setting
records it), then those files are left alone, never moved or deleted.

Each file is data: only a regular file under the size cap is read, and `normalize` (the TUI
passes its checked reader and writer, `conversation_from_dict` then `conversation_to_dict`) turns
it into a format-2 document or raises `ValueError`; a file that fails is skipped and named.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.core.library.store import Library

DONE_KEY = "legacy_import"
LAST_FILE = "last-conversation.json"
KEPT_FOLDER = "conversations"
MAX_BYTES = 256 * 1024 * 1024
Normalize = Callable[[Any], dict[str, Any]]


def legacy_files(state_folder: Path) -> list[Path]:
    """The files to import, oldest first, so the newest is listed first after the import."""
    found = [state_folder / LAST_FILE, *sorted((state_folder / KEPT_FOLDER).glob("*.json"))]
    files = [p for p in found if _regular(p)]
    return sorted(files, key=lambda p: p.stat().st_mtime)


def import_legacy(library: Library, state_folder: Path, normalize: Normalize) -> tuple[int, list[str]]:
    """Import once; returns (how many imported, one line per file skipped). Nothing on later calls."""
    if library.setting(DONE_KEY) is not None:
        return 0, []
    count, skipped = 0, []
    for path in legacy_files(state_folder):
        try:
            document = normalize(_read_json(path))
        except (OSError, ValueError) as exc:
            skipped.append(f"{path.name}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            continue
        mtime = path.stat().st_mtime
        library.save(document, created=mtime)
        count += 1
    library.set_setting(DONE_KEY, json.dumps({"imported": count, "skipped": len(skipped)}))
    return count, skipped


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _read_json(path: Path) -> Any:
    """A regular file only (a FIFO would block forever), opened non-blocking, size-capped."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            raise ValueError("not a regular file of a sensible size")
        raw = handle.read()
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"not JSON ({type(exc).__name__})") from None
