"""The frames the app and its engine process exchange: pickled objects, each after its length.

Why pickle: both ends are this package, started together (`engine.process.client` spawns
`engine.process.child` with the same interpreter and source), and every request, event and result
is one of `engine.core.api`'s frozen dataclasses. Nothing that came from outside (a model's text,
a file) is unpickled here: it only travels inside those dataclasses, as strings.

An exception crosses as itself when it can (an `EngineError` and its kinds keep their class, so
the app tells a context-limit refusal from a failed load); anything that cannot be rebuilt on
the other side becomes an `EngineError` carrying its one line.
"""

from __future__ import annotations

import pickle
import struct
from typing import IO

from engine.core.api import EngineError
from engine.core.text import error_line

LENGTH = struct.Struct("<Q")


class WireClosed(Exception):
    """The other end is gone: end of stream, or a frame cut short."""


def encode(item: object) -> bytes:
    """`item` as one frame (its length, then its pickle)."""
    data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
    return LENGTH.pack(len(data)) + data


def read_frame(stream: IO[bytes]) -> object:
    """The next object on `stream`; raises WireClosed at its end."""
    header = _read_exactly(stream, LENGTH.size)
    (length,) = LENGTH.unpack(header)
    return pickle.loads(_read_exactly(stream, length))


def _read_exactly(stream: IO[bytes], count: int) -> bytes:
    chunks: list[bytes] = []
    left = count
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise WireClosed("the other end closed the stream")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def portable(exc: BaseException) -> BaseException:
    """`exc` as it can cross: itself when it pickles and unpickles, else an EngineError with its
    line (a bug's exception keeps its type's name, so the message still says what happened)."""
    if isinstance(exc, EngineError):
        try:
            pickle.loads(pickle.dumps(exc))
            return exc
        except Exception:  # noqa: BLE001 - any failure to travel: send the line instead
            return EngineError(error_line(exc))
    return EngineError(f"{type(exc).__name__}: {error_line(exc)}")
