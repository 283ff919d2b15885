"""`logitscope list`, `export ID --format md|json` and `import FILE`: the library from a shell.

On the TUI side because a file to import is checked whole by the app's own reader
(`engine.core.chat.fileformat`) before it enters the library, and an export is exactly what the app
reopens. Text from chats and files is data: printed with control characters made visible, and
every failure is one line on stderr (exit 2 for a bad command line or file, 1 for the library).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from engine.core.library import Library, LibraryError, Stored
from engine.core.regular import read_regular_text
from tui.cli_parser import OneLineParser, UsageError
from engine.core.settings import printable, printable_json
from engine.core.text import title_line
from engine.core.chat.export import exchange_json
from engine.core.chat.export import markdown as chat_markdown
from engine.core.chat.conversation import Conversation
from engine.core.chat.fileformat import conversation_from_dict, conversation_to_dict
from engine.core.chat.store import load_conversation

LIBRARY_COMMANDS = ("list", "export", "import")
PREFIX = "logitscope: "


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="logitscope")
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="chats in the library, newest first")
    listing.add_argument("query", nargs="*", help="words every listed chat holds")
    export = commands.add_parser("export", help="print a chat: Markdown (the visible branch) or JSON (everything)")
    export.add_argument("id", help="the chat's id (or the start of it)")
    export.add_argument("--format", choices=("md", "json"), default="md")
    imported = commands.add_parser("import", help="add a chat exported as JSON (or a saved conversation file)")
    imported.add_argument("file", type=Path)
    return parser


def main(argv: Sequence[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        args = _parser().parse_args(list(argv))
    except UsageError as exc:
        return _fail(err, str(exc), 2)
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else 0
    try:
        library = Library()
        if args.command == "list":
            _list(library, " ".join(args.query), out)
        elif args.command == "export":
            stored = library.load(args.id)
            out.write(markdown(stored) if args.format == "md" else printable_json(export_json(stored)) + "\n")
        else:
            return _import(library, args.file, out, err)
    except LibraryError as exc:
        return _fail(err, str(exc), 1)
    out.flush()
    return 0


def _list(library: Library, query: str, out: TextIO) -> None:
    for entry in library.entries(query):
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.updated))
        out.write(printable(f"{entry.id}  {when}  {entry.messages:>4} msgs  {title_line(entry.title)}") + "\n")


def export_json(stored: Stored) -> str:
    """The exchange format of docs/library.md (`engine.core.chat.export.exchange_json`)."""
    return exchange_json(stored.entry.title, stored.entry.model_spec, stored.document)


def markdown(stored: Stored) -> str:
    """The visible branch as Markdown, newlines and tabs kept, every other control made visible."""
    return printable(chat_markdown(stored.entry.title, conversation_from_dict(stored.document)))


def _import(library: Library, path: Path, out: TextIO, err: TextIO) -> int:
    """Check the file whole (the app's reader), then add it under a new id, its title kept."""
    try:
        conversation: Conversation = load_conversation(path)
        title = _title_of(path)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return _fail(err, f"cannot import {path}: {reason}", 2)
    new_id = library.save(conversation_to_dict(conversation))
    if title:
        library.rename(new_id, title)
    out.write(f"{new_id}\n")
    return 0


def _title_of(path: Path) -> str:
    try:
        data = json.loads(read_regular_text(path))
    except (OSError, ValueError):
        return ""
    title = data.get("title") if isinstance(data, dict) else None
    return title if isinstance(title, str) else ""


def _fail(err: TextIO, message: str, code: int) -> int:
    err.write(printable(PREFIX + " ".join(message.split()))[:500] + "\n")
    err.flush()
    return code
