"""The app's library commands: open the library screen, copy a token or a message to the
clipboard (OSC 52, Textual's `copy_to_clipboard`), export the chat as Markdown or JSON.

A helper the app holds (`LibraryActions`), typed by what it needs of the app (`LibraryHost`):
the app's ``action_*`` methods call it, so the bindings can name them as ``app.…`` actions from
any widget (the transcript's y / Y) and the palette lists them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

from textual.notifications import SeverityLevel
from textual.screen import Screen

from engine.core.chat.code_blocks import code_block_text
from engine.core.library import LibraryError
from engine.core.settings import data_dir
from engine.core.chat.export import (
    conversation_json,
    default_title,
    markdown,
    message_text,
)
from tui.app.controller import ChatController
from tui.app.library_sync import LibrarySync
from tui.app.screens.chat import ChatScreen
from tui.app.screens.library import LibraryScreen
from tui.app.widgets.transcript import Transcript

EXPORT_FOLDER = "exports"


class LibraryHost(Protocol):
    """What the library commands need of the app (`LogitscopeApp` is one)."""

    library: LibrarySync
    chat_screen: ChatScreen
    model_spec: str

    @property
    def controller(self) -> ChatController: ...

    @property
    def screen(self) -> Screen[Any]: ...

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...

    def push_screen(self, screen: Screen[Any], callback: Any = None) -> Any: ...

    def run_worker(self, work: Any, *, group: str = "default", exclusive: bool = False) -> Any: ...

    def copy_to_clipboard(self, text: str) -> None: ...


class LibraryActions:
    """The app's library commands, a helper the app holds (its ``action_*`` methods call these)."""

    def __init__(self, app: LibraryHost) -> None:
        self.app = app

    def open_library(self) -> None:
        """The library screen; the live chat's latest change is being saved meanwhile (in a
        thread: the screen opens at once)."""
        if isinstance(self.app.screen, LibraryScreen):
            return
        self.app.library.save_soon()
        self.app.push_screen(LibraryScreen(self.app.library.path, self.app.library.deleted), self._open_from_library)

    def _open_from_library(self, chat_id: str | None) -> None:
        if chat_id:
            self.app.run_worker(self.reopen(chat_id), group="library-open", exclusive=True)

    async def reopen(self, chat_id: str) -> None:
        """The chosen chat becomes the live one, as the chat screen opens a stored chat (the live
        one kept first)."""
        await self.app.chat_screen.conversation_actions.open_stored(chat_id)

    def _cursor(self) -> Any:
        return self.app.chat_screen.query_one(Transcript).cursor

    def copy_token(self) -> None:
        token = self.app.chat_screen.query_one(Transcript).cursor_token  # a reply's, or the user's scored text's
        text = token.text if token is not None else None
        if text is None:
            self.app.notify("Select a token first (Esc, then the arrows).")
            return
        self.app.copy_to_clipboard(text)
        self.app.notify(f"Copied the token ({len(text)} characters).", timeout=3)

    def copy_message(self) -> None:
        text = message_text(self.app.controller.conversation, self._cursor())
        if not text:
            self.app.notify("Nothing to copy yet.")
            return
        self.app.copy_to_clipboard(text)
        self.app.notify(f"Copied the message ({len(text)} characters).", timeout=3)

    def copy_code(self) -> None:
        """The fenced code block at the cursor (else the last one shown), its code only."""
        text = code_block_text(self.app.controller.conversation, self._cursor())
        if text is None:
            self.app.notify("No code block to copy (a fenced ``` block in a reply).")
            return
        self.app.copy_to_clipboard(text)
        lines = text.count("\n") + 1
        self.app.notify(f"Copied the code block ({lines} line{'s' if lines != 1 else ''}).", timeout=3)

    def export_chat(self, fmt: str) -> None:
        """Write the live chat to the exports folder: Markdown (the visible branch) or JSON
        (everything; `logitscope import` and other tools read it)."""
        app = self.app
        conversation = app.controller.conversation
        if conversation.root is None:
            app.notify("Nothing to export yet.")
            return
        title = default_title(conversation)
        text = markdown(title, conversation) if fmt == "md" else conversation_json(title, app.model_spec, conversation)
        path = export_path(data_dir() / EXPORT_FOLDER, app.library.conversation_id, fmt)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except (OSError, LibraryError) as exc:
            app.notify(f"Could not export the chat: {exc}", severity="error", timeout=15)
            return
        app.notify(f"Exported the chat to {path}")


def export_path(folder: Path, chat_id: str | None, fmt: str) -> Path:
    """A new file each time: the chat's id (or the time) and a counter if needed."""
    stem = f"chat-{chat_id}" if chat_id else time.strftime("chat-%Y%m%d-%H%M%S")
    for n in range(1000):
        path = folder / f"{stem}{f'-{n}' if n else ''}.{fmt}"
        if not path.exists():
            return path
    return folder / f"{stem}-{time.time_ns()}.{fmt}"
