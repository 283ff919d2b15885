"""Compile one of logitscope's small C files once per machine into the user's cache folder, and
load a build only once it is known to be ours.

Why at run time: the speed-ups written in C (``engine.cpu.gemv_forward``, ``engine.cpu.native``) must
match the machine's own BLAS and CPU, and a wheel built elsewhere could not. The system's C
compiler is the same one MLX's own ``mx.compile`` needs on a CPU. A build is named by a hash of
its source and flags and reused by every later process.

Why so careful: ``dlopen`` runs a library's code (its constructors) before any symbol is looked
up, so a file at the expected name is never trusted for being there. The folder is ``0700`` and
must belong to this user; each build is compiled to a temporary name, its SHA-256 recorded beside
it, and both renamed into place (a concurrent process sees all of it or none); a library is opened
only when it and its record belong to this user, no one else may write them and the hash matches,
else it is rebuilt. A planted, truncated or half-written file is therefore replaced, never run.
The compiler runs in its own process group, killed with its children after a timeout, and start-up
waits for builds `STARTUP_WAIT_S` in all, however many there are (`WaitBudget`: three libraries
each waiting their own 2 s made a hanging compiler cost 6 s): a slower build finishes in the
background for the next start.
Every failure is a one-line OSError that the callers turn into "off: <reason>".
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from engine.core.settings.paths import cache_dir

COMPILE_TIMEOUT_S = 60.0
STARTUP_WAIT_S = 2.0  # the longest a load waits for a build before going on without it (~0.2 s normally)


class WaitBudget:
    """How long this process may still wait for builds, shared by every `load`: the first waits
    up to `STARTUP_WAIT_S` (read at first use), the next only for what the earlier ones left.
    A compiler that never answers thus costs start-up one wait, not one per library."""

    def __init__(self) -> None:
        self._left: float | None = None
        self._lock = threading.Lock()

    def wait(self, job: threading.Thread) -> None:
        """Join `job` for at most what is left, and charge the time waited."""
        with self._lock:
            if self._left is None:
                self._left = STARTUP_WAIT_S
            left = self._left
        started = time.monotonic()
        job.join(max(left, 0.0))
        with self._lock:
            self._left = max(0.0, (self._left or 0.0) - (time.monotonic() - started))


@functools.cache
def process_budget() -> WaitBudget:
    """The budget of this process's start-up waits."""
    return WaitBudget()


class StillBuilding(OSError):
    """The build outlasted the wait; it goes on in the background and a later load can use it."""


@dataclass(frozen=True)
class Recipe:
    """One C library: its source, the compiler flags, and the symbols every build must export."""

    source: Path
    flags: tuple[str, ...]
    symbols: tuple[str, ...]


def default_folder() -> Path:
    """Where builds are kept: a folder of their own in the user's cache (made private)."""
    return cache_dir() / "native"


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


def record_path(library: Path) -> Path:
    """The file beside a library that holds its SHA-256 (hex), written by the build that made it."""
    return library.with_name(library.name + ".sha256")


def private_folder(folder: Path) -> Path:
    """`folder`, created ``0700`` if missing; refused (OSError) unless it is this user's own.

    A folder of ours that others may write (an older version under ``umask 000``) is closed
    first: the files in it are then checked one by one before use (`verified`).
    """
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise OSError(f"{folder} is not a folder")
    if info.st_uid != os.geteuid():
        raise OSError(f"{folder} belongs to another user; not loading native code from it")
    if stat.S_IMODE(info.st_mode) != 0o700:
        folder.chmod(0o700)
    return folder


def verified(library: Path) -> bool:
    """True when `library` and its record are this user's, writable by no one else, and agree."""
    try:
        record = record_path(library)
        if not (_owned_and_closed(library) and _owned_and_closed(record)):
            return False
        return record.read_text(encoding="ascii").strip() == _sha256(library)
    except (OSError, UnicodeDecodeError):
        return False


def _owned_and_closed(path: Path) -> bool:
    """A regular file of this user's that group and others cannot write (symlinks refused)."""
    info = path.lstat()
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(source: Path, flags: Sequence[str], folder: Path, cc: str | None = None,
          timeout: float = COMPILE_TIMEOUT_S) -> Path:
    """The verified library, compiled now unless a verified build exists. Raises OSError (one line)."""
    target = library_path(source, flags, private_folder(folder))
    if verified(target):
        return target
    cc = cc or compiler()
    if cc is None:
        raise OSError("no C compiler found (set CC, or install gcc)")
    _remove_stale_partials(target.parent, timeout)
    handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    os.close(handle)
    try:
        _compile([cc, *flags, "-o", partial, str(source)], timeout)
        _install(Path(partial), target)
    finally:
        Path(partial).unlink(missing_ok=True)
    return target


def _compile(command: list[str], timeout: float) -> None:
    """Run the compiler in a process group of its own, killed whole when it overruns."""
    name = Path(command[0]).name
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, errors = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise OSError(f"{name} took over {timeout:g} s; stopped it") from None
    if process.returncode != 0:
        first = (errors.strip().splitlines() or ["no output"])[0]
        raise OSError(f"{name} could not build it: {first[:200]}")


def _kill_group(process: subprocess.Popen[str]) -> None:
    """SIGKILL the compiler and everything it started (cc1, as, ld, or a hung wrapper's children)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.communicate()


def _install(partial: Path, target: Path) -> None:
    """Record the new build's hash, then move it into place (the record first: a reader between
    the two renames sees a mismatch and rebuilds, never a library trusted without its record)."""
    partial.chmod(0o700)
    handle, record = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    try:
        with os.fdopen(handle, "w", encoding="ascii") as out:
            out.write(_sha256(partial) + "\n")
        os.replace(record, record_path(target))
    finally:
        Path(record).unlink(missing_ok=True)
    os.replace(partial, target)


def _remove_stale_partials(folder: Path, timeout: float) -> None:
    """Temporary files of builds that were killed (their process died before cleaning up)."""
    too_old = time.time() - 2 * max(timeout, COMPILE_TIMEOUT_S)
    for leftover in folder.glob(".*.partial"):
        try:
            if leftover.lstat().st_mtime < too_old:
                leftover.unlink()
        except OSError:
            pass


class _Build(threading.Thread):
    """One build on a daemon thread, so a caller can stop waiting and the build still finishes."""

    def __init__(self, recipe: Recipe, folder: Path, cc: str | None) -> None:
        super().__init__(name="logitscope-cbuild", daemon=True)
        self.recipe, self.folder, self.cc = recipe, folder, cc
        self.result: Path | None = None
        self.error: OSError | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = build(self.recipe.source, self.recipe.flags, self.folder, self.cc)
        except OSError as exc:
            self.error = exc
        except Exception as exc:  # noqa: BLE001 - anything else is still one line for the caller
            self.error = OSError(str(exc))


def load(recipe: Recipe, folder: Path, *, mode: int = ctypes.RTLD_LOCAL, wait: float | None = None,
         cc: str | None = None, budget: WaitBudget | None = None) -> ctypes.CDLL:
    """The recipe's library, opened with `mode` once verified and found to export every symbol.

    Waits at most `wait` seconds for a build, or by default what is left of `budget` (the
    process's, `process_budget`); after that the build goes on in the background (raising
    `StillBuilding`) and a later load uses it. The library is opened locally first, so one
    lacking a symbol never enters the global scope: its files are
    removed and it is rebuilt for the next start (this process cannot open the new one: the
    loader keeps the old one under that name). A library the loader refuses is rebuilt the same
    way, and one that killed the process opening it is rebuilt before it is opened again
    (`_LoadMarker`). Raises OSError (one line).
    """
    try:
        _LoadMarker(library_path(recipe.source, recipe.flags, folder)).after_a_crash()
    except OSError:
        pass  # no folder yet, or not ours: `build` says so in its own words
    built = _verified_build(recipe, folder) or _wait_for_build(recipe, folder, cc, wait, budget)
    try:
        with _LoadMarker(built):
            library = ctypes.CDLL(str(built), mode=ctypes.RTLD_LOCAL)
    except OSError as exc:
        discard(built)
        _Build(recipe, folder, cc)
        reason = " ".join(str(exc).split())[:160]
        raise OSError(f"{built.name} could not be loaded ({reason}); rebuilding it for the next start") from None
    missing = next((name for name in recipe.symbols if not hasattr(library, name)), None)
    if missing is not None:
        discard(built)
        _Build(recipe, folder, cc)
        raise OSError(f"{built.name} lacked {missing}; rebuilding it for the next start")
    return ctypes.CDLL(str(built), mode=mode) if mode != ctypes.RTLD_LOCAL else library


def _verified_build(recipe: Recipe, folder: Path) -> Path | None:
    """The recipe's build when one is there and verified: found here, it costs no wait from the
    budget (a spent budget must not keep a finished build off)."""
    try:
        target = library_path(recipe.source, recipe.flags, private_folder(folder))
    except OSError:
        return None  # the build reports it, in one line
    return target if verified(target) else None


def _wait_for_build(recipe: Recipe, folder: Path, cc: str | None, wait: float | None,
                    budget: WaitBudget | None) -> Path:
    """Build on a thread; wait `wait` seconds, or what the budget has left. Raises OSError."""
    job = _Build(recipe, folder, cc)
    if wait is None:
        (budget or process_budget()).wait(job)
    else:
        job.join(wait)
    if job.is_alive():
        raise StillBuilding(f"{recipe.source.name} is still building in the background")
    if job.error is not None or job.result is None:
        raise job.error or OSError(f"could not build {recipe.source.name}")
    return job.result


class _LoadMarker:
    """A file beside a library that exists exactly while a process is opening it (its pid inside).

    Why: the hash proves a build is the one we recorded, not that it loads. A library truncated
    after its record was rewritten to match (a disk fault, a careless copy) is mapped past its
    end by ``dlopen``, and the process dies of SIGBUS before Python can catch anything, at every
    start. Found at the next start with its process gone, the marker says the last load crashed:
    the build is thrown away and made again, so a crash at load happens once, never twice.
    """

    def __init__(self, library: Path) -> None:
        self.path = library.with_name(library.name + ".loading")
        self.library = library

    def after_a_crash(self) -> None:
        """Discard the build if a process died while opening it (its marker outlived it)."""
        try:
            pid = int(self.path.read_text(encoding="ascii").strip() or "0")
        except FileNotFoundError:
            return
        except (OSError, ValueError):
            pid = 0
        if pid > 0 and pid != os.getpid() and _alive(pid):
            return  # another process is opening it right now
        discard(self.library)
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> "_LoadMarker":
        self.path.write_text(f"{os.getpid()}\n", encoding="ascii")
        return self

    def __exit__(self, *exc: object) -> None:
        self.path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    """Whether a process `pid` exists (one of another user counts: it exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def discard(library: Path) -> None:
    """Remove a build and its record (the next `build` makes it again)."""
    for path in (library, record_path(library)):
        path.unlink(missing_ok=True)
