"""Chats saved as files, taken into the library at start: `last-conversation.json` and
`conversations/*.json` as logitscope wrote them before the library was the one store, and the
rescue files the app writes to `conversations/` when the library cannot take a chat
(`engine.core.chat.store.RESCUE_FOLDER`).

Each file is data: read only as a regular file under the size cap, checked whole by the file
format's reader (`load_conversation`), stored as its format-2 document. Idempotent: a file whose
document is in the library already adds nothing (`Library.import_document`), so a start that died
between storing a file and moving it imports nothing twice.

Then every file that was read, imported or not, moves to `BACKUP_FOLDER` (never overwriting,
never deleted): the state folder stops holding chats, and a file the reader refused is kept there
for the user, named once. A file that cannot be moved stays and is tried again at the next start.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from engine.core.chat.fileformat import conversation_to_dict
from engine.core.chat.store import RESCUE_FOLDER, load_conversation
from engine.core.library.store import Library

LAST_FILE = "last-conversation.json"  # written on quit by logitscope before the library was the one store
BACKUP_FOLDER = "imported-into-library"  # in the state folder: the files, once imported


@dataclass
class ImportReport:
    """What one import did: chats added, files already in the library, one line per file refused
    (with why), and the files that could not be moved away (imported, tried again next time)."""

    imported: int = 0
    already: int = 0
    skipped: list[str] = field(default_factory=list)
    unmoved: list[str] = field(default_factory=list)
    backup: Path | None = None  # where the files went, when any did


def chat_files(state_folder: Path) -> list[Path]:
    """The files to import, oldest first, so the newest is listed first after the import."""
    found = [state_folder / LAST_FILE, *sorted((state_folder / RESCUE_FOLDER).glob("*.json"))]
    files = [p for p in found if _regular(p)]
    return sorted(files, key=_mtime)


def import_files(library: Library, state_folder: Path) -> ImportReport:
    """Take every chat file of `state_folder` into `library`, then move the files to its backup
    folder. `LibraryError` (the library cannot be written) stops it with the files in place."""
    report = ImportReport()
    for path in chat_files(state_folder):
        try:
            document = conversation_to_dict(load_conversation(path))
        except (OSError, ValueError) as exc:
            report.skipped.append(f"{path.name}: {(str(exc).strip().splitlines() or [type(exc).__name__])[0]}")
        else:
            _, new = library.import_document(document, created=_mtime(path))
            report.imported += new
            report.already += not new
        moved = _move_to_backup(path, state_folder)
        if moved is None:
            report.unmoved.append(path.name)
        else:
            report.backup = moved.parent
    return report


def _move_to_backup(path: Path, state_folder: Path) -> Path | None:
    """`path` moved into the backup folder under a name not taken yet; None if it cannot be."""
    relative = path.relative_to(state_folder)
    folder = state_folder / BACKUP_FOLDER / relative.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for n in range(1000):
            target = folder / (relative.name if n == 0 else f"{path.stem}-{n}{path.suffix}")
            if not target.exists() and not target.is_symlink():
                os.rename(path, target)
                return target
    except OSError:
        return None
    return None


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
