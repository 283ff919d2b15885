"""The library's tables, and the migrations that bring any older database up to date.

`MIGRATIONS[n]` takes a database at version n to n + 1 (`PRAGMA user_version`); each runs in
one transaction (the connection is in autocommit mode; `BEGIN IMMEDIATE` takes the write lock first) with the version bump, so a crash leaves the old version or the new, never half.
A database newer than this logitscope is refused (read as it is, never rewritten down).
"""

from __future__ import annotations

import sqlite3

V1 = (
    """CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL,
        title_set INTEGER NOT NULL DEFAULT 0,
        model_spec TEXT,
        model_folder TEXT,
        created REAL NOT NULL,
        updated REAL NOT NULL,
        messages INTEGER NOT NULL,
        deleted REAL,
        document TEXT NOT NULL,
        text TEXT NOT NULL)""",
    "CREATE INDEX conversations_updated ON conversations(updated DESC)",
    """CREATE TABLE token_blobs (
        conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (conversation_id, position))""",
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)

FTS = (
    """CREATE VIRTUAL TABLE conversations_fts USING fts5(text, content='conversations',
        content_rowid='rowid', tokenize='unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER conversations_ai AFTER INSERT ON conversations BEGIN
        INSERT INTO conversations_fts(rowid, text) VALUES (new.rowid, new.text); END""",
    """CREATE TRIGGER conversations_ad AFTER DELETE ON conversations BEGIN
        INSERT INTO conversations_fts(conversations_fts, rowid, text) VALUES ('delete', old.rowid, old.text); END""",
    """CREATE TRIGGER conversations_au AFTER UPDATE OF text ON conversations BEGIN
        INSERT INTO conversations_fts(conversations_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
        INSERT INTO conversations_fts(rowid, text) VALUES (new.rowid, new.text); END""",
    "INSERT INTO conversations_fts(conversations_fts) VALUES ('rebuild')",
)


def _v1(conn: sqlite3.Connection) -> None:
    for statement in V1:
        conn.execute(statement)


def _v2_fts(conn: sqlite3.Connection) -> None:
    """Full-text search where this SQLite has FTS5; without it search falls back to LIKE."""
    if has_fts5(conn):
        for statement in FTS:
            conn.execute(statement)


MIGRATIONS = (_v1, _v2_fts)
VERSION = len(MIGRATIONS)


def has_fts5(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite was built with FTS5 (most are; some system builds are not)."""
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(x)")
        conn.execute("DROP TABLE temp.fts5_probe")
        return True
    except sqlite3.OperationalError:
        return False


def has_fts_table(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'conversations_fts'").fetchone()
    return row is not None


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database to `VERSION`, one migration per transaction; returns the old version.
    `ValueError` (one line) for a database made by a newer logitscope."""
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    if current > VERSION:
        raise ValueError(f"the library was written by a newer logitscope (schema {current}, this one reads {VERSION})")
    for step in range(current, VERSION):
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] == step:  # else another process did it
                MIGRATIONS[step](conn)
                conn.execute(f"PRAGMA user_version = {step + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return current
