"""Compile one of logitscope's small C files once per machine into the user's cache folder.

Why at run time: the speed-ups written in C (``engine.cpu.gemv_forward``, ``engine.cpu.native``) must
match the machine's own BLAS and CPU, and a wheel built elsewhere could not. The system's C
compiler is the same one MLX's own ``mx.compile`` needs on a CPU. A build is named by a hash of
its source and flags, written atomically (a concurrent process sees all of it or none) and
reused by every later process; no compiler, or a failed build, raises a one-line OSError that
the callers turn into "off: <reason>".
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

COMPILE_TIMEOUT_S = 60


def compiler(env: Mapping[str, str] | None = None) -> str | None:
    """``$CC`` if set, else the first of cc, gcc, clang on the PATH."""
    env = os.environ if env is None else env
    chosen = env.get("CC", "").strip()
    if chosen:
        return shutil.which(chosen) or (chosen if Path(chosen).is_file() else None)
    return next((found for name in ("cc", "gcc", "clang") if (found := shutil.which(name))), None)


def library_path(source: Path, flags: Sequence[str], folder: Path) -> Path:
    """Where the build of this exact source, these flags and this machine type is cached."""
    digest = hashlib.sha256(source.read_bytes() + " ".join(flags).encode()).hexdigest()[:16]
    return folder / f"{source.stem}-{digest}-{platform.machine()}.so"


def build(source: Path, flags: Sequence[str], folder: Path, cc: str | None = None) -> Path:
    """The compiled library, built now unless a cached build exists. Raises OSError (one line)."""
    target = library_path(source, flags, folder)
    if target.is_file():
        return target
    cc = cc or compiler()
    if cc is None:
        raise OSError("no C compiler found (set CC, or install gcc)")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=target.parent, suffix=".so.partial")
    os.close(handle)
    try:
        done = subprocess.run([cc, *flags, "-o", partial, str(source)], capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT_S)
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no output"])[0]
            raise OSError(f"{Path(cc).name} could not build it: {first}")
        os.replace(partial, target)
    except subprocess.TimeoutExpired as exc:
        raise OSError(f"{Path(cc).name} took over {COMPILE_TIMEOUT_S} s") from exc
    finally:
        Path(partial).unlink(missing_ok=True)
    return target
