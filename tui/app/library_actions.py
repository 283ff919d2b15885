"""The app's library commands: open the library screen, copy a token or a message to the
clipboard (OSC 52, Textual's `copy_to_clipboard`), export the chat as Markdown or JSON.

A mixin of `LogitscopeApp`, so the bindings can name them as ``app.…`` actions from any widget
(the transcript's y / Y) and the palette lists them; app.py keeps only the wiring.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.core.library import LibraryError
from engine.core.chat.code_blocks import code_block_text
from engine.core.settings import data_dir
from engine.core.chat.export import (
    conversation_json,
    default_title,
    markdown,
    message_text,
    token_text,
)
from tui.app.screens.library import LibraryScreen, reopen
from tui.app.widgets.transcript import Transcript

if TYPE_CHECKING:
    from tui.app.library_sync import LibrarySync

EXPORT_FOLDER = "exports"


class LibraryActions:
    """Needs `library` (a `LibrarySync`), `chat_screen` and `controller` on the app."""

    library: LibrarySync
    chat_screen: Any
    controller: Any
    model_spec: str

    def action_open_library(self: Any) -> None:
        """The library screen; the live chat's latest change is being saved meanwhile (in a
        thread: the screen opens at once)."""
        if isinstance(self.screen, LibraryScreen):
            return
        self.library.save_soon()
        self.push_screen(LibraryScreen(self.library.path, self.library.deleted), self._open_from_library)

    def _open_from_library(self: Any, chat_id: str | None) -> None:
        if chat_id:
            self.run_worker(reopen(self, chat_id), group="library-open", exclusive=True)

    def _cursor(self: Any) -> Any:
        return self.chat_screen.query_one(Transcript).cursor

    def action_copy_token(self: Any) -> None:
        text = token_text(self._cursor())
        if text is None:
            self.notify("Select a token first (Esc, then the arrows).")
            return
        self.copy_to_clipboard(text)
        self.notify(f"Copied the token ({len(text)} characters).", timeout=3)

    def action_copy_message(self: Any) -> None:
        text = message_text(self.controller.conversation, self._cursor())
        if not text:
            self.notify("Nothing to copy yet.")
            return
        self.copy_to_clipboard(text)
        self.notify(f"Copied the message ({len(text)} characters).", timeout=3)

    def action_copy_code(self: Any) -> None:
        """The fenced code block at the cursor (else the last one shown), its code only (#30.6)."""
        text = code_block_text(self.controller.conversation, self._cursor())
        if text is None:
            self.notify("No code block to copy (a fenced ``` block in a reply).")
            return
        self.copy_to_clipboard(text)
        lines = text.count("\n") + 1
        self.notify(f"Copied the code block ({lines} line{'s' if lines != 1 else ''}).", timeout=3)

    def action_export_chat(self: Any, fmt: str) -> None:
        """Write the live chat to the exports folder: Markdown (the visible branch) or JSON
        (everything; `logitscope import` and other tools read it)."""
        conversation = self.controller.conversation
        if conversation.root is None:
            self.notify("Nothing to export yet.")
            return
        title = default_title(conversation)
        text = markdown(title, conversation) if fmt == "md" else conversation_json(title, self.model_spec, conversation)
        path = export_path(data_dir() / EXPORT_FOLDER, self.library.conversation_id, fmt)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except (OSError, LibraryError) as exc:
            self.notify(f"Could not export the chat: {exc}", severity="error", timeout=15)
            return
        self.notify(f"Exported the chat to {path}")


def export_path(folder: Path, chat_id: str | None, fmt: str) -> Path:
    """A new file each time: the chat's id (or the time) and a counter if needed."""
    stem = f"chat-{chat_id}" if chat_id else time.strftime("chat-%Y%m%d-%H%M%S")
    for n in range(1000):
        path = folder / f"{stem}{f'-{n}' if n else ''}.{fmt}"
        if not path.exists():
            return path
    return folder / f"{stem}-{time.time_ns()}.{fmt}"
