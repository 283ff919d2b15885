"""A bracketed paste stays one paste, whatever it holds: an ESC inside it is text, never keys.

Why: Textual's terminal parser (8.x, `textual._xterm_parser.XTermParser.parse`) reads an ESC
inside a bracketed paste as the start of an escape sequence. The characters after it are then
left out of the paste and, once the sequence is too long or times out, sent as key presses: a
pasted ``ESC [ 3 1 m red BEL`` arrived reordered, and its BEL as Ctrl+G (a binding). Text copied
from a terminal (coloured logs, a model's raw output) holds exactly such sequences.

`PasteSafeParser` shows the parser, between a paste's start and end markers, the ESCs that are
not the end marker as the visible symbol ``␛`` (what `engine.core.text.printable` makes of an
ESC anyway): the parser then keeps the whole paste as one `Paste` event, in order, and nothing
in it can act as a key. Outside a paste nothing changes (an Escape key press still arrives at
once: nothing is held back). Markers split across reads are found (the last characters passed
on are remembered; inside a paste, a possible end marker is held until the next read).

`paste_safe_driver` is the app's driver: Textual's own `LinuxDriver` (also macOS's), its input
loop run with this parser. Textual builds the parser inside that loop by its module name, so the
loop's code is reused with that one name bound to ours, rather than copying the loop here.
"""

from __future__ import annotations

import types
from typing import Iterable

from textual._xterm_parser import BRACKETED_PASTE_END, BRACKETED_PASTE_START, XTermParser
from textual.driver import Driver
from textual.message import Message

ESC = "\x1b"
SHOWN_ESC = "\u241b"  # ␛, as `printable` shows an ESC


def _partial_end(text: str) -> int:
    """How many of `text`'s last characters could begin the paste's end marker."""
    for size in range(min(len(text), len(BRACKETED_PASTE_END) - 1), 0, -1):
        if BRACKETED_PASTE_END.startswith(text[-size:]):
            return size
    return 0


class PasteGuard:
    """The input stream with the ESCs inside bracketed pastes made visible (see the module)."""

    def __init__(self) -> None:
        self.in_paste = False
        self._held = ""  # inside a paste: what may be the start of its end marker
        self._seen = ""  # outside: the last characters passed on (a start marker split across reads)

    def __call__(self, data: str) -> str:
        out: list[str] = []
        text, self._held = self._held + data, ""
        at = 0
        while at < len(text):
            if not self.in_paste:
                look = self._seen + text[at:]
                found = look.find(BRACKETED_PASTE_START)
                if found < 0:
                    out.append(text[at:])
                    self._seen = look[-(len(BRACKETED_PASTE_START) - 1):]
                    break
                past = found + len(BRACKETED_PASTE_START) - len(self._seen)  # in text[at:]
                out.append(text[at:at + past])
                at, self.in_paste, self._seen = at + past, True, ""
            else:
                found = text.find(BRACKETED_PASTE_END, at)
                if found < 0:
                    rest = text[at:]
                    keep = _partial_end(rest)
                    out.append(rest[:len(rest) - keep].replace(ESC, SHOWN_ESC))
                    self._held = rest[len(rest) - keep:]
                    break
                out.append(text[at:found].replace(ESC, SHOWN_ESC) + BRACKETED_PASTE_END)
                at, self.in_paste = found + len(BRACKETED_PASTE_END), False
        return "".join(out)

    def held(self) -> str:
        """What is still held back (at the end of input: given as it is)."""
        held, self._held = self._held, ""
        return held


class PasteSafeParser(XTermParser):
    """Textual's parser, fed through a `PasteGuard`."""

    def __init__(self, debug: bool = False) -> None:
        super().__init__(debug)
        self.guard = PasteGuard()

    def feed(self, data: str) -> Iterable[Message]:  # type: ignore[override]
        if data:
            guarded = self.guard(data)
            if guarded:  # all of it held (a possible end marker): "" would say the input ended
                yield from super().feed(guarded)
            return
        held = self.guard.held()  # the end of input
        if held:
            yield from super().feed(held)
        yield from super().feed("")


def paste_safe_driver(driver_class: type[Driver]) -> type[Driver]:
    """`driver_class` with its input loop parsing through `PasteSafeParser`, where it is Textual's
    `LinuxDriver` (or a subclass) whose loop builds its parser by that name; else unchanged
    (Windows, a driver named in TEXTUAL_DRIVER, a Textual whose loop is not what this expects)."""
    from textual.drivers import linux_driver

    if not issubclass(driver_class, linux_driver.LinuxDriver):
        return driver_class
    loop = linux_driver.LinuxDriver.run_input_thread
    if loop.__closure__ or "XTermParser" not in loop.__code__.co_names:
        return driver_class
    names = {**loop.__globals__, "XTermParser": PasteSafeParser}
    guarded = types.FunctionType(loop.__code__, names, loop.__name__, loop.__defaults__)
    guarded.__doc__ = f"{loop.__doc__} (through `{__name__}.PasteSafeParser`)"
    return type("PasteSafeDriver", (driver_class,), {"run_input_thread": guarded, "__module__": __name__})
