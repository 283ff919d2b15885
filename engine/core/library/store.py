"""The conversation library: one SQLite database (WAL) that keeps every chat as it happens.

Each conversation is its format-2 document (`engine.core.chat.fileformat`) with the token lists moved
into compact blobs (`documents`, `blobs`), plus the columns the list and the search read
(title, model, dates, length, text). Every write is one `BEGIN IMMEDIATE` transaction: WAL lets
readers go on while it commits, and a SIGKILL mid-commit leaves the last committed state. A
second process (two app windows, `logitscope run --save`) waits up to `timeout` seconds for the
write lock. Every SQLite failure (locked, read-only, corrupt, disk full) becomes one
`LibraryError` line naming the file, so the caller can say why saving stopped and chat on.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core import strictjson
from engine.core.chat.conversation import Conversation
from engine.core.chat.fileformat import conversation_from_dict
from engine.core.library import schema
from engine.core.library.blobs import BlobError
from engine.core.library.documents import join_document, split_document, summarize, tokens_elsewhere
from engine.core.library.search import where_clause
from engine.core.regular import require_regular
from engine.core.settings.paths import data_dir

DB_NAME = "library.sqlite3"
LIST_COLUMNS = "id, title, model_spec, model_folder, created, updated, messages"


class LibraryError(Exception):
    """Why the library cannot do what was asked, in one line (the chat itself is unharmed)."""


class ChatChanged(LibraryError):
    """`Library.save_if` found the chat changed since the revision the caller had."""


@dataclass(frozen=True)
class Entry:
    """One chat as the library lists it."""

    id: str
    title: str
    model_spec: str | None
    model_folder: str | None
    created: float
    updated: float
    messages: int


@dataclass(frozen=True)
class Stored:
    """A chat read back: its listing and its whole format-2 document, tokens included."""

    entry: Entry
    document: dict[str, Any]


def default_path() -> Path:
    """`$XDG_DATA_HOME/logitscope/library.sqlite3`."""
    return data_dir() / DB_NAME


class Library:
    """An open library. Thread-safe (one lock around the connection), so the TUI may write from
    a worker thread while the event loop stays free."""

    def __init__(self, path: Path | None = None, *, timeout: float = 2.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path) if path is not None else default_path()
        self._clock = clock
        self._lock = threading.RLock()
        self._conn = self._guard(lambda: self._connect(timeout), "open")
        self.fts = self._guard(lambda: schema.has_fts_table(self._conn), "open")

    def _connect(self, timeout: float) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            require_regular(self.path)  # SQLite would open a FIFO and wait on it forever
        conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at checkpoints, never corrupt
            schema.migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    # --- writing

    def save(self, document: dict[str, Any], *, conversation_id: str | None = None,
             model_spec: str | None = None, created: float | None = None) -> str:
        """Store `document` (new when `conversation_id` is None); returns the id. A title the
        user set is kept; otherwise it follows the first user message. `created` (an import's
        file time) also dates the new row's last change."""
        with self._write("save") as conn:
            return self._store(conn, document, conversation_id, model_spec, created, self._clock())

    def _store(self, conn: sqlite3.Connection, document: dict[str, Any], conversation_id: str | None,
               model_spec: str | None, created: float | None, now: float) -> str:
        """`save`'s writes, inside the caller's write transaction."""
        skeleton, blobs = split_document(document)
        summary = summarize(document)
        new_id = conversation_id or secrets.token_hex(6)
        row = {"id": new_id, "title": summary.title, "spec": model_spec, "folder": summary.model_folder,
               "created": created if created is not None else now, "updated": created or now,
               "messages": summary.messages, "doc": strictjson.dumps(skeleton, ensure_ascii=False), "text": summary.text}
        conn.execute(
            """INSERT INTO conversations (id, title, model_spec, model_folder, created, updated, messages,
                   document, text) VALUES (:id, :title, :spec, :folder, :created, :updated, :messages, :doc, :text)
               ON CONFLICT(id) DO UPDATE SET
                   title = CASE WHEN title_set THEN title ELSE excluded.title END,
                   model_spec = COALESCE(excluded.model_spec, model_spec),
                   model_folder = COALESCE(excluded.model_folder, model_folder),
                   updated = excluded.updated, messages = excluded.messages, deleted = NULL,
                   document = excluded.document, text = excluded.text""", row)
        conn.execute("DELETE FROM token_blobs WHERE conversation_id = ?", (new_id,))
        conn.executemany("INSERT INTO token_blobs (conversation_id, position, data) VALUES (?, ?, ?)",
                         [(new_id, i, b) for i, b in enumerate(blobs)])
        return new_id

    def import_document(self, document: dict[str, Any], *, created: float | None = None) -> tuple[str, bool]:
        """Store `document` unless a chat with exactly this document is stored already (deleted
        or not); returns (its id, whether it is new). One write transaction, so importing the
        same file twice (a start that died before the file was moved away) adds nothing."""
        summary = summarize(document)
        with self._write("import") as conn:
            same = conn.execute("SELECT id FROM conversations WHERE text = ? AND messages = ?",
                                (summary.text, summary.messages)).fetchall()
            for (conversation_id,) in same:
                try:
                    if self._document(conn, conversation_id) == document:
                        return str(conversation_id), False
                except ValueError:
                    continue  # a damaged row is not this file
            return self._store(conn, document, None, None, created, self._clock()), True

    def save_if(self, document: dict[str, Any], conversation_id: str, revision: float | None, *,
                model_spec: str | None = None) -> float:
        """`save` over the chat `conversation_id` only if no one changed it since `revision` (its
        `updated` as last read or written here; None: the chat must not exist yet); returns the
        new revision. `ChatChanged` otherwise, nothing written.

        Why: two `run --continue` on one chat each rewrote the whole document, and the later
        writer silently replaced the other's turn. The check and the write share one write
        transaction, and each write moves `updated` strictly forward, so it is a revision.
        """
        with self._write("save") as conn:
            row = conn.execute("SELECT updated FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
            current = None if row is None else row[0]
            if current != revision:
                raise ChatChanged(f"chat {conversation_id} was changed by another logitscope meanwhile")
            now = max(self._clock(), (current or 0.0) + 1e-3)
            self._store(conn, document, conversation_id, model_spec, None, now)
            return now

    def rename(self, conversation_id: str, title: str) -> None:
        """Set the title the list shows (kept from now on); an empty title goes back to the default."""
        title = " ".join(title.split())
        with self._write("rename") as conn:
            self._require(conn, conversation_id)
            if title:
                conn.execute("UPDATE conversations SET title = ?, title_set = 1 WHERE id = ?", (title, conversation_id))
            else:
                conn.execute("UPDATE conversations SET title_set = 0 WHERE id = ?", (conversation_id,))

    def delete(self, conversation_id: str) -> None:
        """Hide a chat (undo with `restore`); `purge` removes hidden chats for good."""
        with self._write("delete") as conn:
            self._require(conn, conversation_id)
            conn.execute("UPDATE conversations SET deleted = ? WHERE id = ?", (self._clock(), conversation_id))

    def restore(self, conversation_id: str) -> None:
        with self._write("restore") as conn:
            conn.execute("UPDATE conversations SET deleted = NULL WHERE id = ?", (conversation_id,))

    def purge(self, older_than: float = 0.0) -> int:
        """Remove chats deleted at least `older_than` seconds ago; returns how many."""
        with self._write("purge") as conn:
            cursor = conn.execute("DELETE FROM conversations WHERE deleted IS NOT NULL AND deleted <= ?",
                                  (self._clock() - older_than,))
            return cursor.rowcount

    def fork(self, conversation_id: str) -> str:
        """A copy of a chat under a new id (title "… (copy)"); returns the new id."""
        stored = self.load(conversation_id)
        new_id = self.save(stored.document, model_spec=stored.entry.model_spec)
        self.rename(new_id, f"{stored.entry.title} (copy)")
        return new_id

    def set_setting(self, key: str, value: str) -> None:
        with self._write("save a setting") as conn:
            conn.execute("INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", (key, value))

    # --- reading

    def setting(self, key: str) -> str | None:
        with self._read("read") as conn:
            row = conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def entries(self, query: str = "", limit: int = 500) -> list[Entry]:
        """Chats not deleted, newest first, whose text or title holds every word of `query`."""
        where, args = where_clause(query, self.fts)
        with self._read("search") as conn:
            rows = conn.execute(f"SELECT {LIST_COLUMNS} FROM conversations WHERE deleted IS NULL AND {where} "
                                "ORDER BY updated DESC LIMIT ?", (*args, limit)).fetchall()
        return [Entry(*row) for row in rows]

    def resolve(self, reference: str) -> str:
        """The id that `reference` names: the id itself, or a prefix of exactly one id.

        A blank reference names nothing: as a prefix, '' would match every id, so the only chat
        of a library was continued or exported for ``--continue ''``. Every command that takes
        an id comes through here, so this is the one place that refuses it."""
        if not reference.strip():
            raise LibraryError("a chat id must not be empty ('logitscope list' shows the ids)")
        with self._read("find") as conn:
            rows = conn.execute("SELECT id FROM conversations WHERE id = ? OR id LIKE ? ESCAPE '\\' LIMIT 2",
                                (reference, reference.replace("%", "\\%").replace("_", "\\_") + "%")).fetchall()
        ids = [r[0] for r in rows]
        if reference in ids:
            return reference
        if len(ids) != 1:
            raise LibraryError(f"no chat {reference!r} in the library" if not ids else f"{reference!r} names more than one chat")
        return str(ids[0])

    def load(self, reference: str) -> Stored:
        """A chat, deleted or not, with its whole document; `LibraryError` if there is none."""
        conversation_id = self.resolve(reference)
        with self._read("open") as conn:
            row = conn.execute(f"SELECT {LIST_COLUMNS} FROM conversations WHERE id = ?",
                               (conversation_id,)).fetchone()
            if row is None:
                raise LibraryError(f"no chat {reference!r} in the library")
            try:
                return Stored(_entry(row), self._document(conn, conversation_id))
            except ValueError as exc:
                raise LibraryError(f"chat {conversation_id} in {self.path} is damaged: {exc}") from None

    @staticmethod
    def _document(conn: sqlite3.Connection, conversation_id: str) -> dict[str, Any]:
        """A stored chat's whole document, checked (ValueError if damaged)."""
        (text,) = conn.execute("SELECT document FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        blobs = [b for (b,) in conn.execute("SELECT data FROM token_blobs WHERE conversation_id = ? "
                                            "ORDER BY position", (conversation_id,))]
        return checked_document(text, blobs)

    def load_conversation(self, reference: str) -> tuple[Entry, "Conversation"]:
        """A chat as a checked `Conversation`, its tokens read straight from their blobs (what
        opening a chat needs: `load`'s document of token dicts took twice as long to build and
        read back); `LibraryError` if there is none or it is damaged."""
        from engine.core.library.token_events import stored_conversation

        conversation_id = self.resolve(reference)
        with self._read("open") as conn:
            row = conn.execute(f"SELECT {LIST_COLUMNS}, document FROM conversations WHERE id = ?",
                               (conversation_id,)).fetchone()
            blobs = [b for (b,) in conn.execute("SELECT data FROM token_blobs WHERE conversation_id = ? "
                                                "ORDER BY position", (conversation_id,))]
        if row is None:
            raise LibraryError(f"no chat {reference!r} in the library")
        try:
            return _entry(row[:-1]), stored_conversation(row[-1], blobs)
        except ValueError as exc:
            raise LibraryError(f"chat {conversation_id} in {self.path} is damaged: {exc}") from None

    def integrity(self) -> str:
        """`PRAGMA integrity_check`'s first line: "ok" for a sound database."""
        with self._read("check") as conn:
            return str(conn.execute("PRAGMA integrity_check").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # --- plumbing

    @staticmethod
    def _require(conn: sqlite3.Connection, conversation_id: str) -> None:
        if conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone() is None:
            raise LibraryError(f"no chat {conversation_id!r} in the library")

    @contextmanager
    def _write(self, action: str) -> Iterator[sqlite3.Connection]:
        """One transaction holding the write lock from its start (no upgrade deadlock between two
        writers); rolled back whole on any error."""
        with self._lock, self._errors(action):
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _read(self, action: str) -> Iterator[sqlite3.Connection]:
        with self._lock, self._errors(action):
            yield self._conn

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except (sqlite3.Error, OSError, ValueError) as exc:
            if isinstance(exc, LibraryError):
                raise
            raise LibraryError(describe(exc, action, self.path)) from None

    def _guard(self, call: Callable[[], Any], action: str) -> Any:
        with self._errors(action):
            return call()


def checked_document(text: object, blobs: list[bytes]) -> dict[str, Any]:
    """A stored chat's whole document, held to the shape a saved file is (`conversation_from_dict`
    reads it: ValueError naming the first problem). Why: a row is a file on disk too; one whose
    document had the wrong shape (nodes a number, a version a string) reached `export` and `run
    --continue` as a TypeError traceback."""
    try:
        skeleton = json.loads(text)  # type: ignore[arg-type]
    except (ValueError, TypeError, RecursionError) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None
    conversation_from_dict(tokens_elsewhere(skeleton))  # the tree, every field but the tokens checked
    try:
        return join_document(skeleton, blobs)
    except (BlobError, ValueError, IndexError, TypeError, AttributeError, KeyError) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None


def _entry(row: tuple[Any, ...]) -> Entry:
    """The listing columns, type-checked (SQLite stores whatever a hand-edit put there)."""
    entry = Entry(*row)
    texts_ok = all(isinstance(v, str) or v is None for v in (entry.model_spec, entry.model_folder))
    numbers_ok = all(isinstance(v, (int, float)) and not isinstance(v, bool)
                     for v in (entry.created, entry.updated, entry.messages))
    if not isinstance(entry.id, str) or not isinstance(entry.title, str) or not texts_ok or not numbers_ok:
        raise ValueError("its listing columns (title, model, dates, length) have the wrong types")
    return entry


def describe(exc: BaseException, action: str, path: Path) -> str:
    """One line a user can act on, from SQLite's message."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    lowered = text.lower()
    if "locked" in lowered or "busy" in lowered:
        why = "another logitscope is writing it (locked)"
    elif "readonly" in lowered or "read-only" in lowered or isinstance(exc, PermissionError):
        why = "it is read-only"
    elif "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
        why = "it is damaged (not a readable SQLite database)"
    else:
        why = text
    return f"library {path}: cannot {action}: {why}"
