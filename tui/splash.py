"""A first frame drawn at once, before Textual is even imported.

Why: on a busy machine Textual's import and the first layout take seconds of CPU (measured on
a loaded 2-core host: 4.5-9 s to the chat screen), and the engine thread's MLX import shares the
interpreter with them. Without this the terminal stays as the shell left it all that time; with
it, the user sees at once that logitscope is starting and which model it loads. Plain ANSI on
the alternate screen, which Textual then takes over (and leaves on exit).
"""

from __future__ import annotations

import shutil
from typing import Callable, TextIO

from engine.core.text import printable

ENTER, LEAVE = "\x1b[?1049h", "\x1b[?1049l"  # the alternate screen, as Textual uses it
TITLE = "logitscope"


def paint_splash(out: TextIO, model: str) -> Callable[[], None]:
    """Draw the frame on `out` (a terminal); returns what leaves it again, for an exit before
    the app runs (a bad flag). `model` is the user's spec: shown made printable."""
    columns, rows = shutil.get_terminal_size((80, 24))
    what = f"starting… the model ({printable(model)[:max(10, columns - 40)]}) loads while the screen comes up"
    status = f" {printable(model)[:columns - 14]}  loading…".ljust(columns)[:columns]
    middle = max(1, rows // 2)
    out.write(f"{ENTER}\x1b[H\x1b[2J\x1b[1m{TITLE.center(columns).rstrip()}\x1b[0m"
              f"\x1b[{middle};1H{what.center(columns).rstrip()}\x1b[{rows};1H\x1b[7m{status}\x1b[0m")
    out.flush()

    def leave() -> None:
        out.write(LEAVE)
        out.flush()
    return leave
