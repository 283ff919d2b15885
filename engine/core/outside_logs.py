"""What the libraries under the engine say (transformers, huggingface_hub, mlx-lm), as our lines.

transformers and huggingface_hub each give their logger a handler of their own when first
imported, writing to stderr with their own prefix (``[transformers] `tokenizer_class` is ...``):
under `logitscope run` that line broke the rule that every stderr line is ours, one line each,
and in the app it went under the screen. Python warnings print two lines with a file name.

`route_outside_logs` replaces those handlers with one that writes each message as
``logitscope: warning: ...`` (one line, control characters made visible, shortened), and shows
Python warnings the same way. It is called where these libraries come in (a model or tokenizer
load), after importing their logging set-up, since a handler added earlier would only be joined
by theirs. Messages below WARNING stay quiet, as the libraries' own defaults have them.

No MLX, no Textual: importing this module imports none of those libraries.
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
import warnings
from typing import TextIO

from engine.core.text import printable, shortened

LIBRARIES = ("transformers", "huggingface_hub", "mlx_lm")
SET_UPS = ("transformers.utils.logging", "huggingface_hub.utils.logging")  # where each adds its handler
MAX_LINE = 500


def warning_line(message: str) -> str:
    """One line for stderr: our prefix, whitespace runs (newlines too) as one space, controls visible."""
    return shortened("logitscope: warning: " + printable(" ".join(message.split())), MAX_LINE)


class OneLineHandler(logging.Handler):
    """Writes a record as `warning_line` to the stderr of the moment (the app may have replaced it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _write(sys.stderr, warning_line(record.getMessage()))
        except Exception:  # noqa: BLE001 - a message that cannot be formatted is the library's bug
            self.handleError(record)


def _write(stream: TextIO | None, line: str) -> None:
    if stream is not None:
        stream.write(line + "\n")
        stream.flush()


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    """`warnings.showwarning` as one line: the category and the message, no file name or source."""
    _write(file or sys.stderr, warning_line(f"{category.__name__}: {message}"))


@functools.cache
def _handler() -> OneLineHandler:
    """The process's one handler (the same object each call, so routing twice adds nothing)."""
    return OneLineHandler(logging.WARNING)


def route_outside_logs() -> None:
    """Route the libraries' log records and Python warnings through `warning_line` (idempotent;
    cheap once the libraries are imported)."""
    for module in SET_UPS:
        try:
            importlib.import_module(module)  # their handler is added now, so it can be replaced
        except Exception:  # noqa: BLE001 - a library that is not installed says nothing
            continue
    handler = _handler()
    for name in LIBRARIES:
        logger = logging.getLogger(name)
        for other in [h for h in logger.handlers if h is not handler]:
            logger.removeHandler(other)
        if handler not in logger.handlers:
            logger.addHandler(handler)
        logger.propagate = False
    warnings.showwarning = _show_warning
