"""Text that did not come from our code, made safe to show in a terminal.

Model tokens, chat templates, file and folder names, config values and saved conversations can
hold terminal control sequences: ``ESC ] 52 ; c ; ... BEL`` writes the user's clipboard, ``ESC ] 0``
retitles the window, ``ESC [ 2 J`` clears the screen. Written raw, each one is obeyed by the
terminal. `printable` is the one place such text is defused: every C0 and C1 control character
except newline and tab becomes a visible stand-in, so the user sees *that* something odd was
there (``␛]52;c;aGk=␇``) instead of having it done to them.

It is also the one place a user-facing line is shortened: `shortened` (a long text, its middle
cut with a count), `clipped` (a value echoed in a message: its start and end), `error_line` (an
exception as one status-bar line), `typed_value` (a bad input as the user typed it) and
`title_line` (a chat's title where chats are listed). The cutting itself is `shortened`'s alone.
Both front ends and every engine use these, so one bad input is one readable line everywhere.
"""

from __future__ import annotations

from typing import Final


def _table() -> dict[int, str]:
    """C0 (but newline and tab) -> the Unicode "control pictures" (␀ ... ␟), DEL -> ␡,
    C1 -> ``\\x9b``-style text (there are no pictures for them, and 0x9b is a one-byte CSI)."""
    table = {code: chr(0x2400 + code) for code in range(0x20) if code not in (0x09, 0x0A)}
    table[0x7F] = "\u2421"
    table.update({code: f"\\x{code:02x}" for code in range(0x80, 0xA0)})
    return table


_VISIBLE: Final[dict[int, str]] = _table()
# JSON escapes C0 itself but writes DEL and C1 raw (0x9b is CSI to many terminals): escape them
# the JSON way, which keeps the decoded text exact.
_JSON_ESCAPES: Final[dict[int, str]] = {code: f"\\u{code:04x}" for code in range(0x7F, 0xA0)}


def printable(text: str) -> str:
    """`text` with every control character except newline and tab made visible.

    One translate call: cheap enough for every streamed token. The result has the same
    characters otherwise, so offsets of ordinary text are unchanged.
    """
    return text.translate(_VISIBLE)


def printable_json(dumped: str) -> str:
    """A ``json.dumps(..., ensure_ascii=False)`` result with DEL and C1 written as ``\\u`` escapes:
    the same JSON to a parser, nothing a terminal obeys. (JSON's structure is ASCII, so these
    characters can only sit inside strings.)"""
    return dumped.translate(_JSON_ESCAPES)


def shortened(text: str, limit: int = 500, *, say_cut: bool = True) -> str:
    """`text` in at most `limit` characters: the one way logitscope shortens text it shows.

    With `say_cut` (messages that echo a value: a 20 MB [model] default, a pasted megabyte) it is
    cut in the middle, keeping its start and its end, and says how much went. Without (a title,
    a preview in a list row) it keeps the start and ends with "…", as it does for any `limit`
    too small to hold the note.
    """
    if len(text) <= limit:
        return text
    if not say_cut or limit < 80:
        return text[: max(limit - 1, 0)] + "…"
    marker = f" … ({len(text) - limit + 40:,} characters cut) … "
    tail = limit // 5
    return text[: limit - tail - len(marker)] + marker + text[-tail:]


def clipped(value: str, limit: int = 120) -> str:
    """A value the user gave, echoed in a message: its start and end, however long it is."""
    return value if len(value) <= limit else f"{value[: limit * 2 // 3]}…{value[-(limit // 3):]}"


def error_line(error: BaseException, limit: int = 240) -> str:
    """The first line of an exception's message, shortened: what a user can read in a status bar."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return shortened(text, limit, say_cut=False)


def typed_value(value: object, limit: int = 24) -> str:
    """A value as the user typed it (its repr), cut short so one bad input stays one readable line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


TITLE_CHARS: Final = 80  # a chat's title where chats are listed (the library, `logitscope list`)


def title_line(text: str, limit: int = TITLE_CHARS) -> str:
    """A title (or any text shown as one row of a list) on one line of at most `limit` characters:
    runs of whitespace, newlines too, become one space. A title can be anything a user typed or
    a file held (a rename, an import): a 10 MB one was listed whole, on one line."""
    head = text[: limit * 4 + 4]  # enough to fill the line however much whitespace collapses
    line = " ".join(head.split())
    return shortened(line + " …" if len(head) < len(text) else line, limit, say_cut=False)
