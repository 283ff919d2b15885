"""Reading only regular files: the one check every file the app reads goes through.

Why: opening a FIFO for reading blocks until some writer comes, which may be never (a FIFO at
``model.safetensors``, at ``tokenizer.json`` or in the KV cache folder hung start-up and
``run --continue`` forever); a character device may never end. So a file is opened without
blocking (``O_NONBLOCK``, which a regular file ignores) and checked with ``fstat`` before a byte
is read; a path handed to a library that opens it itself (mlx-lm, transformers, SQLite) is
checked with ``stat`` first. Either way a non-regular file is one `NotRegularFile` line.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"))


class NotRegularFile(OSError):
    """A path that is not a regular file where one is read; the message is one line."""

    def __init__(self, path: Path | str, mode: int) -> None:
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        super().__init__(errno.EINVAL, f"not a regular file ({kind})")
        self.filename = str(path)

    def __str__(self) -> str:
        return f"{self.filename} is {self.strerror}"


def open_regular(path: Path | str) -> BinaryIO:
    """`path` opened for reading in binary, once it is known to be a regular file (symlinks are
    followed: a Hugging Face cache's files are links to blobs). OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path, mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_bytes(path: Path | str) -> bytes:
    """The bytes of a regular file (`open_regular`)."""
    with open_regular(path) as handle:
        return handle.read()


def read_regular_text(path: Path | str) -> str:
    """The UTF-8 text of a regular file; UnicodeDecodeError for other bytes."""
    return read_regular_bytes(path).decode("utf-8")


def require_regular(path: Path | str) -> None:
    """OSError unless `path` is a regular file now: for paths a library opens itself."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularFile(path, mode)


def first_irregular(folder: Path) -> Path | None:
    """The first entry of `folder` that is neither a regular file nor a folder (a FIFO, a socket,
    a device, a dangling link is fine: nothing can open it), or None: checked before a loader
    that globs and opens what it finds (mlx-lm, transformers) is let into the folder."""
    for entry in sorted(folder.iterdir()):
        try:
            mode = entry.stat().st_mode
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            return entry
    return None
