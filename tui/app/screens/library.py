"""The library screen: every kept chat, newest first; type to filter (full-text search over every
message), Enter reopens, Ctrl+R renames, Ctrl+D deletes (Ctrl+Z brings it back), Ctrl+F forks.

Dismisses with the id of the chat to reopen (None: closed); reopening is the chat screen's job.
Each query runs in a thread (`Library.entries` is one indexed SELECT), the newest query wins, so
typing never waits on the disk. Titles and model names are data: shown through `literal` /
`printable`, never as markup.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label, OptionList
from textual.widgets.option_list import Option

from engine.core.library import Entry, Library, LibraryError
from tui.app.bindings import bindings_for
from engine.core.text import title_line
from tui.app.safe_text import literal, printable
from tui.app.screens.dialogs import Dialog, ValueDialog
from tui.app.widgets.plain_input import PlainInput


LIST_LIMIT = 100  # rows shown (20 fit on the screen); typing narrows the rest, and fewer rows paint faster


def entry_row(entry: Entry, now: float) -> Text:
    """Title, then model, date and length, dim: one row of the list."""
    row = Text(printable(title_line(entry.title)), style="bold")
    model = Path(entry.model_spec or entry.model_folder or "").name or (entry.model_spec or "")
    when = time.strftime("%H:%M" if now - entry.updated < 86_400 else "%Y-%m-%d", time.localtime(entry.updated))
    details = [printable(model), when, f"{entry.messages} messages"]
    row.append("  " + " · ".join(d for d in details if d), style="dim")
    return row


class LibraryScreen(Dialog):
    """Find a chat and reopen it; rename, delete (with undo) and fork on the way."""

    DEFAULT_CSS = """
    LibraryScreen > Vertical { width: 100; }
    LibraryScreen Label { width: 100%; height: auto; }  /* wraps on a small screen, never clips */
    LibraryScreen OptionList { height: auto; max-height: 20; }
    """
    BINDINGS = bindings_for("library")

    def __init__(self, path: Path, deleted: list[str] | None = None) -> None:
        """`deleted`: the undo stack, the app's, so Ctrl+Z still brings a chat back after the
        dialog was closed and opened again (#30.6); the dialog pushes and pops it."""
        super().__init__()
        self.path = path
        self.library: Library | None = None
        self.entries: list[Entry] = []
        self.deleted: list[str] = deleted if deleted is not None else []  # undo stack
        self.generation = 0  # the newest query; older answers are dropped
        self.shown = 0  # the query whose rows are on screen

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Library  (Enter opens · Ctrl+R rename · Ctrl+D delete · Ctrl+Z undo · Ctrl+F fork · Esc)")
            yield PlainInput(placeholder="type to search every message", id="filter")
            yield OptionList(id="chats")
            yield Label("", id="note", classes="hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        self.refresh_list()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.refresh_list()

    def refresh_list(self, keep: str | None = None) -> None:
        self.generation += 1
        self._query(self.query_one(Input).value, self.generation, keep)

    @work(thread=True, exclusive=True, group="library-query", exit_on_error=False)
    def _query(self, text: str, generation: int, keep: str | None) -> None:
        """Off the event loop: open the library once, then one SELECT per keystroke."""
        try:
            if self.library is None:
                self.library = Library(self.path, timeout=1.0)
            entries = self.library.entries(text, LIST_LIMIT)
        except LibraryError as exc:
            self.app.call_from_thread(self._note, str(exc))
            return
        self.app.call_from_thread(self._show, entries, generation, keep)

    def _show(self, entries: list[Entry], generation: int, keep: str | None) -> None:
        if generation != self.generation:
            return  # a newer query is on its way
        self.entries, self.shown = entries, generation
        now = time.time()
        options = self.query_one(OptionList)
        options.set_options([Option(entry_row(e, now)) for e in entries])
        ids = [e.id for e in entries]
        options.highlighted = ids.index(keep) if keep in ids else (0 if entries else None)
        empty = "No chat matches." if self.query_one(Input).value.strip() else "No chats kept yet."
        self._note("" if entries else empty)

    def _note(self, line: str) -> None:
        self.query_one("#note", Label).update(literal(line))

    def _current(self) -> Entry | None:
        index = self.query_one(OptionList).highlighted
        if index is None or not 0 <= index < len(self.entries):
            self.app.bell()
            return None
        return self.entries[index]

    def action_move(self, step: int) -> None:
        options = self.query_one(OptionList)
        options.action_cursor_down() if step > 0 else options.action_cursor_up()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        entry = self._current()
        if entry is not None:
            self.dismiss(entry.id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.query_one(OptionList).highlighted = event.option_index
        self.on_input_submitted(None)  # type: ignore[arg-type]

    def action_rename(self) -> None:
        entry = self._current()
        if entry is None:
            return

        def renamed(title: str | None) -> None:
            if title is not None and self._change(lambda lib: lib.rename(entry.id, title)):
                self.refresh_list(keep=entry.id)
        self.app.push_screen(ValueDialog("Rename the chat", entry.title, lambda _t: None,
                                         "Empty: the first message names it again"), renamed)

    def action_delete(self) -> None:
        entry = self._current()
        if entry is not None and self._change(lambda lib: lib.delete(entry.id)):
            self.deleted.append(entry.id)
            self.refresh_list()
            self._note(f"Deleted “{entry.title}”: Ctrl+Z brings it back.")

    def action_undo(self) -> None:
        if not self.deleted:
            self.app.bell()
            return
        chat_id = self.deleted.pop()
        if self._change(lambda lib: lib.restore(chat_id)):
            self.refresh_list(keep=chat_id)

    def action_fork(self) -> None:
        entry = self._current()
        if entry is None or self.library is None:
            return
        try:
            new_id = self.library.fork(entry.id)
        except LibraryError as exc:
            self._note(str(exc))
            return
        self.refresh_list(keep=new_id)

    def _change(self, change: Callable[[Library], None]) -> bool:
        """One small write (a row's flag or title): on the loop, it takes milliseconds."""
        if self.library is None:
            return False
        try:
            change(self.library)
        except LibraryError as exc:
            self._note(str(exc))
            return False
        return True

    def action_dismiss_none(self) -> None:
        self.dismiss(None)

    def on_unmount(self) -> None:
        if self.library is not None:
            self.library.close()
