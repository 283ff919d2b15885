"""Writing a conversation to disk, atomically, so a crash or a closed terminal loses nothing."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from tui.model.conversation import Conversation

LAST_CONVERSATION = "last-conversation.json"  # written on quit, reopened by "Resume last conversation"


def last_conversation_path(save_dir: Path) -> Path:
    return save_dir / LAST_CONVERSATION


def save_conversation(conversation: Conversation, path: Path) -> None:
    """JSON via a temporary file and `os.replace`: the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".conversation-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(conversation.to_dict(), handle, ensure_ascii=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_conversation(path: Path) -> Conversation:
    """The inverse of `save_conversation`: OSError if unreadable, ValueError for anything else wrong."""
    data = json.loads(path.read_text(encoding="utf-8"))
    try:
        return Conversation.from_dict(data)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(f"not a saved conversation ({type(exc).__name__}: {exc})") from exc
