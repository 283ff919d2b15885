"""Keeping the chat in the conversation library as it happens (`engine.core.library`).

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
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from textual.message import Message as TextualMessage

from engine.core.library import Library, LibraryError, import_legacy
from tui.app import messages as msg
from engine.core.chat.conversation import Conversation, Node
from engine.core.chat.fileformat import conversation_from_dict, conversation_to_dict

SETTLE_S = 0.3  # an edit, delete or flip reaches the library this soon (a burst of changes: one save)
STREAM_S = 2.0  # a streaming reply is committed at least this often
PURGE_AFTER_S = 30 * 86_400  # a deleted chat can be undone this long (across restarts), then goes
LAST_ID = "last_id"  # the chat saved last, so a resumed copy of it continues its row
SAVE_NOW = (msg.GenerationStarted, msg.GenerationFinished, msg.GenerationFailed)
Post = Callable[[TextualMessage], object]


def _normalize(data: Any) -> dict[str, Any]:
    """An old JSON file through the checked reader, out as format 2 (ValueError if it is bad)."""
    return conversation_to_dict(conversation_from_dict(data))


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
        self._state_folder = state_folder
        self._conversation = conversation
        self._model_spec = model_spec
        self._report = report
        self._streaming = streaming
        self._pending: asyncio.TimerHandle | None = None  # the save a change scheduled
        self._library: Library | None = None
        self._tracked: Conversation | None = None  # the chat `conversation_id` belongs to
        self.conversation_id: str | None = None
        self._saved_revision: tuple[int, int] | None = None  # (id, revision) of what was saved
        self._last_save = 0.0
        self._saving = False
        self._again = False
        self._last_problem: str | None = None
        self._unsaid: str | None = None
        self.deleted: list[str] = []  # the library dialog's undo stack: it outlives the dialog (#30.6)

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
        except RuntimeError:  # no loop (a script or a test driving the tree): `save_now` keeps it
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

    def save_now(self) -> None:
        """Write at once, on this thread (quitting): the last change is never left behind."""
        job = self._snapshot(False)
        if job is not None:
            self._write(*job)
        self._say()

    def kept(self) -> bool:
        """Commit the live chat now, on this thread (it is about to be replaced): whether it is in
        the library. False (the reason said in one line) when the library cannot take it, so the
        caller asks the user instead of losing the chat."""
        job = self._snapshot(False)
        if job is not None:
            self._write(*job)
        self._say()
        return self._last_problem is None and self.conversation_id is not None

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
        """Open the library the first time (and import the old files once), then save."""
        document = conversation_to_dict(snapshot)
        try:
            library = self._open()
            chosen = self.conversation_id if conversation is self._tracked else None
            chosen = chosen or self._resumed_id(library, document)
            saved = library.save(document, conversation_id=chosen, model_spec=self._model_spec())
            library.set_setting(LAST_ID, saved)
        except LibraryError as exc:
            self._saved_revision = None  # try again at the next change
            self._problem(f"Not saved to the library: {exc}")
            return
        if conversation is self._tracked:
            self.conversation_id = saved
        self._last_problem = None

    def _open(self) -> Library:
        if self._library is None:
            library = Library(self.path, timeout=1.0)
            _, skipped = import_legacy(library, self._state_folder, _normalize)
            library.purge(older_than=PURGE_AFTER_S)
            if skipped:
                self._problem(f"{len(skipped)} old saved chats could not be imported; the first: {skipped[0]}")
            self._library = library
        return self._library

    @staticmethod
    def _resumed_id(library: Library, document: dict[str, Any]) -> str | None:
        """The chat saved last, when this new one is exactly it (Resume reopened it): one row."""
        last = library.setting(LAST_ID)
        if last is None:
            return None
        try:
            return last if library.load(last).document == document else None
        except LibraryError:
            return None

    def _problem(self, line: str) -> None:
        """Remember a new reason (the writing thread must not touch widgets); `_say` shows it."""
        if line != self._last_problem:
            self._last_problem = self._unsaid = line

    def _say(self) -> None:
        line, self._unsaid = self._unsaid, None
        if line is not None:
            self._report(line)

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        if self._library is not None:
            self._library.close()
            self._library = None
