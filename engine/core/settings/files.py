"""TOML files for the settings: read with located errors, find a key's line, write atomically.

Kept apart from `engine.core.settings.config` (which knows what the settings *mean*) because this part only
knows about files: where a key sits in the text, and how to replace a file without ever leaving
half of one behind. `tui.app.themes` and `tui.app.keymap` reuse it for the same one-line messages.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from engine.core import regular

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class ConfigError(Exception):
    """A settings file that cannot be saved; the message is one line for the user."""


@dataclass(frozen=True)
class TomlProblem:
    """Why a TOML file could not be read, as one line; `missing` when it simply does not exist."""

    message: str
    missing: bool = False


_WHERE = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")
_END = re.compile(r"\s*\(at end of document\)$")
_KEY_PART = r'(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|\'[^\']*\')'
_HEADER = re.compile(rf"^\s*\[\s*({_KEY_PART}(?:\s*\.\s*{_KEY_PART})*)\s*\]")
_ASSIGN = re.compile(rf"^\s*({_KEY_PART}(?:\s*\.\s*{_KEY_PART})*)\s*=")
_PART = re.compile(_KEY_PART)

MAX_DEPTH = 16  # tables and arrays inside each other; settings and themes need 4
MAX_PROBLEMS = 20  # lines listed per file; the rest are counted in one more line


def display_path(path: Path) -> str:
    """A path as the user would type it: the home folder shortened to ``~``."""
    home = Path.home()
    if home == Path(home.anchor):  # HOME=/ would turn every path into "~/..."
        return str(path)
    try:
        return "~/" + str(path.expanduser().absolute().relative_to(home))
    except ValueError:
        return str(path)


def read_regular_text(path: Path) -> str:
    """The UTF-8 text of a regular file (`engine.core.regular`: a FIFO at the config path hung
    start-up). OSError for anything else, UnicodeDecodeError for other bytes."""
    return regular.read_regular_text(path)


def read_toml(path: Path) -> tuple[dict[str, Any], str] | TomlProblem:
    """The parsed file and its text, or one line saying what is wrong (syntax errors located)."""
    shown = display_path(path)
    try:
        text = read_regular_text(path)
    except FileNotFoundError:
        return TomlProblem(f"{shown}: no such file", missing=True)
    except UnicodeDecodeError:
        return TomlProblem(f"{shown}: not UTF-8 text")
    except OSError as exc:
        return TomlProblem(f"{shown}: cannot read it ({exc.strerror or exc})")
    parsed = parse_toml(text, shown)
    return parsed if isinstance(parsed, TomlProblem) else (parsed, text)


def parse_toml(text: str, shown: str) -> dict[str, Any] | TomlProblem:
    """Parse TOML text; a syntax error becomes one line naming `shown` (the file), line, column.

    A file nested deeper than `MAX_DEPTH` is refused whole: tomllib recurses into nested arrays
    and inline tables (800 levels raise `RecursionError`), and it builds a dotted header
    ``[a.a.a...]`` of any depth without recursing, which everything that walks the result later
    (merging, saving) would then do.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return TomlProblem(_syntax_message(shown, text, str(exc)))
    except RecursionError:
        data = None
    if data is None or _too_deep(data):
        return TomlProblem(f"{shown}: nested too deeply (more than {MAX_DEPTH} levels) to be a settings file")
    return data


def _too_deep(data: dict[str, Any]) -> bool:
    """Whether tables and arrays nest more than `MAX_DEPTH` levels (a loop, not a recursion)."""
    stack: list[tuple[object, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _syntax_message(shown: str, text: str, message: str) -> str:
    """tomllib says "Invalid value (at line 3, column 15)"; we say "file:3:15: TOML syntax error"."""
    where = _WHERE.search(message)
    if where:
        line, column = where.groups()
        return f"{shown}:{line}:{column}: TOML syntax error: {message[: where.start()]}"
    if _END.search(message):
        line = str(max(1, len(text.splitlines())))
        return f"{shown}:{line}: TOML syntax error at the end of the file: {_END.sub('', message)}"
    return f"{shown}: TOML syntax error: {message}"


def _split_key(dotted: str) -> tuple[str, ...]:
    """``a."b.c" . d`` -> ("a", "b.c", "d"): TOML dotted keys, quotes respected."""
    parts = []
    for match in _PART.finditer(dotted):
        part = match.group(0)
        parts.append(part[1:-1] if part[0] in "\"'" else part)
    return tuple(parts)


class KeyLines:
    """Where each key path of a file is set, from one scan of its text.

    A scan, not a parser: it follows ``[table]`` headers and ``key =`` lines, which is what
    settings files are made of. An inline table holding the key counts as the key's line.
    Built once per file, so reporting n problems is linear (a scan per problem took 46 s for
    4,000 bad ``[keys]`` lines). A path counts only to `MAX_DEPTH` + 1 parts: no key of a file
    that parsed is deeper, and a line that merely looks like a longer one (inside a multi-line
    string) must not cost the square of its length.
    """

    def __init__(self, text: str) -> None:
        self._under: dict[tuple[str, ...], int] = {}  # a path -> first line setting it or inside it
        self._at: dict[tuple[str, ...], int] = {}  # a path -> first line assigning exactly it
        current: tuple[str, ...] = ()
        for number, line in enumerate(text.splitlines(), 1):
            header = _HEADER.match(line)
            if header and not line.lstrip().startswith("[["):
                current = _split_key(header.group(1))[: MAX_DEPTH + 1]
                self._mark_under(current, number)
                continue
            assign = _ASSIGN.match(line)
            if assign:
                path = (current + _split_key(assign.group(1)))[: MAX_DEPTH + 1]
                self._mark_under(path, number)
                self._at.setdefault(path, number)

    def _mark_under(self, path: tuple[str, ...], number: int) -> None:
        for end in range(len(path) + 1):
            self._under.setdefault(path[:end], number)

    def line(self, target: tuple[str, ...]) -> int | None:
        """The first line that sets `target`, something inside it, or a table value holding it."""
        found = [self._under.get(target)] + [self._at.get(target[:end]) for end in range(1, len(target))]
        return min((line for line in found if line is not None), default=None)

    def location(self, path: Path, table: tuple[str, ...], key: str | None = None) -> str:
        """``~/.config/logitscope/config.toml:12`` for the key, or just the file if not found.

        A dotted key such as ``param.temperature.up`` is looked for both quoted (one key) and
        bare (nested keys), since both spell the same setting.
        """
        targets = [table] if key is None else [table + (key,), table + tuple(key.split("."))]
        for target in targets:
            line = self.line(target)
            if line is not None:
                return f"{display_path(path)}:{line}"
        return display_path(path)


def find_line(text: str, target: tuple[str, ...]) -> int | None:
    """The 1-based line where the key path `target` (table parts + key) is set, or None."""
    return KeyLines(text).line(target)


def format_location(path: Path, text: str, table: tuple[str, ...], key: str | None = None) -> str:
    """One key's location (see `KeyLines.location`); to locate many, build one `KeyLines`."""
    return KeyLines(text).location(path, table, key)


@dataclass
class Problems:
    """One file's problem lines: the first `MAX_PROBLEMS` kept, the rest only counted, so a file
    of 4,000 bad lines is 21 lines for the user (and locating stops once nobody will read it)."""

    path: Path
    lines: list[str] = field(default_factory=list)
    more: int = 0

    @property
    def full(self) -> bool:
        return len(self.lines) >= MAX_PROBLEMS

    def add(self, line: str) -> None:
        if self.full:
            self.more += 1
        else:
            self.lines.append(line)

    def listed(self) -> list[str]:
        """The kept lines, then how many more there were."""
        tail = [f"{display_path(self.path)}: {self.more} more problems not listed"] if self.more else []
        return self.lines + tail


def write_toml_atomically(path: Path, data: dict[str, Any]) -> None:
    """Replace `path` with `data` as TOML, all or nothing; raises ConfigError (one line).

    A temporary file in the same folder is written, flushed to disk, then moved over the
    original with ``os.replace`` (atomic on POSIX and Windows). A symlinked file (dotfile
    managers) is written through the link rather than replacing the link. The folder is
    created if needed; an existing file keeps its permissions.
    """
    target = path.resolve() if path.is_symlink() else path
    payload = tomli_w.dumps(data).encode("utf-8")
    tmp: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o644
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise ConfigError(f"could not save {display_path(path)}: {exc.strerror or exc}") from exc
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
