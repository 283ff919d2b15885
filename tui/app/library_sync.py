"""Keeping the chat in the conversation library as it happens (`engine.core.library`).

The library is the one store of chats: the app's "resume" is its most recently changed chat,
and nothing else is written while it works. When it cannot take a chat (locked, read-only,
damaged, a full disk) at a moment the chat would otherwise be lost (quitting, a closed terminal,
the user's "save" in the keep-it dialog), the chat goes to a rescue file in the state folder
(`rescue`), which the next start takes into the library with the files of older versions
(`start`, `engine.core.library.legacy`).

The controller's messages say when a turn starts, finishes or fails: those commit at once. Every
other change (an edit, a delete, a flip between versions, a token) reaches `changed` through the
conversation's own change counter (`Conversation.watch`), and commits `SETTLE_S` later (a burst of
changes is one save); a reply still streaming commits at most every `STREAM_S`. Nothing polls.

The snapshot is taken on the event loop, where the conversation lives, as a shallow copy of the
tree (token events are frozen, so copying their lists is enough: ~0.1 ms for 10,000 tokens);
`conversation_to_dict`, packing and SQLite run in a thread, one save at a time (a change during a
save is saved right after it), so the loop never waits on them (a 10,000-token chat took 70 ms to
convert, on the loop before). A library that cannot be opened or written (locked,
read-only, damaged) is one line to the user, said once per new reason, while chatting goes on.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from textual.message import Message as TextualMessage

from engine.core.chat.conversation import Conversation, Node
from engine.core.chat.fileformat import conversation_to_dict
from engine.core.chat.store import RESCUE_FOLDER, save_copy
from engine.core.library import ImportReport, Library, LibraryError, import_files
from tui.app import messages as msg

SETTLE_S = 0.3  # an edit, delete or flip reaches the library this soon (a burst of changes: one save)
STREAM_S = 2.0  # a streaming reply is committed at least this often
PURGE_AFTER_S = 30 * 86_400  # a deleted chat can be undone this long (across restarts), then goes
SAVE_NOW = (msg.GenerationStarted, msg.GenerationFinished, msg.GenerationFailed)
Post = Callable[[TextualMessage], object]


def frozen_copy(conversation: Conversation) -> Conversation:
    """The tree as it is now, safe to read from another thread while the live one grows: new
    nodes and versions, each token list copied (its events are immutable)."""
    if conversation.root is None:
        return Conversation(conversation.system_prompt)
    copies: dict[int, Node] = {}
    for node in conversation.iter_nodes():
        copies[id(node)] = Node(node.role, [replace(v, tokens=None if v.tokens is None else list(v.tokens))
                                            for v in node.versions], node.active)
    for node in conversation.iter_nodes():
        for version, twin in zip(node.versions, copies[id(node)].versions):
            twin.child = copies[id(version.child)] if version.child is not None else None
    return Conversation(conversation.system_prompt, copies[id(conversation.root)])


class LibrarySync:
    """The live conversation, kept in the library. `conversation` and `model_spec` are read when
    needed (the controller replaces its conversation on a new chat); `report` shows one line."""

    def __init__(self, path: Path, state_folder: Path, conversation: Callable[[], Conversation],
                 model_spec: Callable[[], str | None], report: Callable[[str], None],
                 streaming: Callable[[], bool] = lambda: False) -> None:
        self.path = path
        self.rescue_folder = state_folder / RESCUE_FOLDER
        self._state_folder = state_folder
        self._conversation = conversation
        self._model_spec = model_spec
        self._report = report
        self._streaming = streaming
        self._pending: asyncio.TimerHandle | None = None  # the save a change scheduled
        self._library: Library | None = None
        self._opening = threading.RLock()  # the start's and a save's thread may both open it; re-entrant: SIGHUP
        self._imported = False
        self._closed = False
        self._started: asyncio.Task[None] | None = None
        self._tracked: Conversation | None = None  # the chat `conversation_id` belongs to
        self.conversation_id: str | None = None
        self._saved_revision: tuple[int, int] | None = None  # (id, revision) of what was saved
        self._rescued: tuple[tuple[int, int], Path] | None = None  # the last rescue file, and of what
        self._last_save = 0.0
        self._saving = False
        self._again = False
        self._last_problem: str | None = None
        self._unsaid: str | None = None
        self._notes: list[str] = []  # lines from a thread (what the start imported), shown on the loop
        self.deleted: list[str] = []  # the library dialog's undo stack: it outlives the dialog (#30.6)

    def start(self) -> None:
        """At the app's start, in a thread: open the library and take in the chat files found in
        the state folder (those of older versions, rescue files), so "resume" sees them."""
        self._started = asyncio.get_running_loop().create_task(self._start())

    async def _start(self) -> None:
        try:
            await asyncio.to_thread(self._open)
        except LibraryError as exc:  # said now, before a chat is written that it will not keep; the
            self._problem(not_saved(exc))  # saves that fail for the same reason say nothing more
        except (OSError, ValueError) as exc:  # the state folder itself unreadable: chatting goes on
            self._report_soon(f"Chat files in {self._state_folder} not taken into the library: {exc}")
        self._say()

    async def ready(self) -> None:
        """Wait for `start`'s import (the library's newest chat may be one it brings in)."""
        if self._started is not None:
            await asyncio.shield(self._started)

    def observing(self, post: Post) -> Post:
        """`post`, also committing when a turn starts, ends or fails."""
        def post_and_save(message: TextualMessage) -> object:
            result = post(message)
            if isinstance(message, SAVE_NOW):
                self.save_soon(force=True)
            return result
        return post_and_save

    def adopt(self, conversation: Conversation, conversation_id: str) -> None:
        """`conversation` was opened from the library as `conversation_id`: keep saving to it."""
        self._tracked, self.conversation_id = conversation, conversation_id
        self._saved_revision = (id(conversation), conversation.revision)

    def live_id(self) -> str | None:
        """The library's id of the live chat, when it is stored (None for an empty or unsaved one)."""
        conversation = self._conversation()
        return self.conversation_id if conversation is self._tracked and conversation.root is not None else None

    def latest(self, other_than: str | None) -> str | None:
        """In a thread: the most recently changed chat but `other_than` (the live one), if any.
        `LibraryError` if the library cannot be read."""
        entries = self._open().entries(limit=2)
        return next((e.id for e in entries if e.id != other_than), None)

    def read(self, chat_id: str) -> tuple[str, Conversation]:
        """In a thread: a stored chat's title and tree, checked by the file format's rules as it is
        read (`LibraryError` if the library cannot be read or the chat is damaged)."""
        entry, conversation = self._open().load_conversation(chat_id)
        return entry.title, conversation

    def changed(self, conversation: Conversation) -> None:
        """A change of the live chat (`Conversation.watch`): commit it soon, once per burst; a
        streaming reply at most every `STREAM_S`."""
        if self._pending is not None:
            return
        delay = SETTLE_S
        if self._streaming():
            delay = max(delay, STREAM_S - (time.monotonic() - self._last_save))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a script or a test driving the tree): `kept` keeps it
            return
        self._pending = loop.call_later(delay, self._pending_save)

    def _pending_save(self) -> None:
        self._pending = None
        self.save_soon()

    def save_soon(self, force: bool = False) -> None:
        """Snapshot now (on the loop) and write it in a thread, unless nothing changed."""
        job = self._snapshot(force)
        if job is None:
            return
        if self._saving:
            self._again = True
            return
        self._saving = True
        asyncio.get_running_loop().create_task(self._write_in_thread(job))

    def kept(self) -> bool:
        """Commit the live chat now, on this thread (it is about to be replaced, or the app
        quits): whether it is in the library. False (the reason said in one line) when the
        library cannot take it, so the caller rescues it or asks the user instead of losing it.
        A save in flight in a thread is waited for and written over (it may be older)."""
        job = self._snapshot(force=self._saving)
        if job is not None:
            self._write(*job)
        self._say()
        return self._conversation().root is None or (self._last_problem is None and self.conversation_id is not None)

    def keep_copy(self, conversation: Conversation) -> str:
        """Keep `conversation` as it is now, apart from the live row (before the live chat is cut,
        or when the library failed to take it): a new chat in the library, else a rescue file.
        Returns the line that says where; `OSError` when neither can take it."""
        try:
            self._open().save(conversation_to_dict(conversation), model_spec=self._model_spec())
        except LibraryError as exc:
            path = self.rescue(conversation)
            return f"Saved the chat to {path} (the library could not take it: {exc}; it is taken in at the next start)."
        return "Kept a copy of the chat in the library (Ctrl+G)."

    def rescue(self, conversation: Conversation) -> Path:
        """The chat the library could not take, in a file of its own in `rescue_folder` (once per
        change: quitting tries twice); the next start imports it. `OSError` if it cannot be written."""
        now = (id(conversation), conversation.revision)
        if self._rescued is not None and self._rescued[0] == now and self._rescued[1].is_file():
            return self._rescued[1]
        path = save_copy(conversation, self.rescue_folder)
        self._rescued = (now, path)
        return path

    def _snapshot(self, force: bool) -> tuple[Conversation, Conversation] | None:
        conversation = self._conversation()
        if conversation is not self._tracked:
            self._tracked, self.conversation_id, self._saved_revision = conversation, None, None
        if conversation.root is None:
            return None
        now = (id(conversation), conversation.revision)
        if now == self._saved_revision and not force:
            return None
        self._saved_revision = now
        self._last_save = time.monotonic()
        return conversation, frozen_copy(conversation)

    async def _write_in_thread(self, job: tuple[Conversation, Conversation]) -> None:
        try:
            await asyncio.to_thread(self._write, *job)
        finally:
            self._saving = False
        self._say()
        if self._again:
            self._again = False
            self.save_soon(force=True)

    def _write(self, conversation: Conversation, snapshot: Conversation) -> None:
        """Save the snapshot to the chat's row (a new row the first time)."""
        document = conversation_to_dict(snapshot)
        try:
            library = self._open()
            chosen = self.conversation_id if conversation is self._tracked else None
            saved = library.save(document, conversation_id=chosen, model_spec=self._model_spec())
        except LibraryError as exc:
            self._saved_revision = None  # try again at the next change
            self._problem(not_saved(exc))
            return
        if conversation is self._tracked:
            self.conversation_id = saved
        self._last_problem = None

    def _open(self) -> Library:
        """The library, opened the first time it is needed (any thread); the chat files of the
        state folder are taken in once per run, and chats deleted long enough ago purged."""
        with self._opening:
            if self._closed:
                raise LibraryError(f"library {self.path}: closed (logitscope is quitting)")
            if self._library is None:
                self._library = Library(self.path, timeout=1.0)
            library = self._library
            if not self._imported:
                self._import(library)
        return library

    def _import(self, library: Library) -> None:
        """`import_files`, said in one line; a library that cannot be written leaves the files
        in place for the next start. Purging is housekeeping: a failure waits for the next start."""
        try:
            report = import_files(library, self._state_folder)
        except LibraryError as exc:
            self._report_soon(f"Chat files in {self._state_folder} not taken into the library yet: {exc}")
            self._imported = True  # once per run: the next start tries again
            return
        self._imported = True
        self._report_soon(import_note(report))
        try:
            library.purge(older_than=PURGE_AFTER_S)
        except LibraryError:
            pass

    def _report_soon(self, line: str) -> None:
        """A line from any thread, shown on the loop (`_say` shows it after the write, the start
        after its thread)."""
        if line:
            self._notes.append(line)

    def _problem(self, line: str) -> None:
        """Remember a new reason (the writing thread must not touch widgets); `_say` shows it."""
        if line != self._last_problem:
            self._last_problem = self._unsaid = line

    def _say(self) -> None:
        line, self._unsaid = self._unsaid, None
        while self._notes:
            self._report(self._notes.pop(0))
        if line is not None:
            self._report(line)

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        with self._opening:
            self._closed = True
            if self._library is not None:
                self._library.close()
                self._library = None


def not_saved(error: LibraryError) -> str:
    """The one line for a library that cannot keep the chat (at the start, or at a save)."""
    return f"Chats are not being saved to the library: {error}"


def import_note(report: ImportReport) -> str:
    """One line for what `import_files` did ("" when it found no file)."""
    parts = []
    if report.imported or report.already:
        chats = f"{report.imported} chat{'s' if report.imported != 1 else ''}"
        same = f" ({report.already} already there)" if report.already else ""
        parts.append(f"Took {chats} saved as files into the library{same}")
    if report.skipped:
        parts.append(f"{len(report.skipped)} file{'s' if len(report.skipped) != 1 else ''} could not be read as a "
                     f"chat, the first: {report.skipped[0]}")
    if not parts:
        return ""
    where = f"; the files are now in {report.backup}" if report.backup else ""
    left = f"; {len(report.unmoved)} could not be moved and stay where they were" if report.unmoved else ""
    return ". ".join(parts) + where + left + "."
