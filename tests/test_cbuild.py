"""engine.cpu.cbuild: a file at a library's expected name is never trusted for being there.

Planted, truncated, half-written and stale builds are rebuilt, never opened; the folder is the
user's own; a hanging compiler is killed with its children, and nobody waits on it for long.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.cpu import blas, cbuild, gemv_forward, native

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(cbuild.compiler() is None or not sys.platform.startswith("linux"),
                                reason="needs a C compiler on Linux")

CONSTRUCTOR = """#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen("%s", "w"); if (f) { fputs("ran", f); fclose(f); }
}
void logitscope_swiglu_f32(void) {}
"""


def _compile(tmp_path: Path, source: str, name: str) -> Path:
    c_file = tmp_path / f"{name}.c"
    c_file.write_text(source)
    out = tmp_path / f"{name}.so"
    subprocess.run([str(cbuild.compiler()), "-shared", "-fPIC", "-o", str(out), str(c_file)], check=True)
    return out


def _load_in_child(folder: Path) -> subprocess.CompletedProcess[str]:
    """native.load in a fresh process: a crash there (SIGBUS) must not take the test run down."""
    code = f"from pathlib import Path\nfrom engine.cpu import native\nprint(native.load(Path({str(folder)!r}))[1])"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_a_planted_library_never_runs_and_is_replaced(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    marker = tmp_path / "constructor-ran"
    target = cbuild.library_path(native.SOURCE, native.FLAGS, folder)
    os.replace(_compile(tmp_path, CONSTRUCTOR % marker, "planted"), target)
    kernels, status = native.load(folder)
    assert status == "on" and kernels is not None
    assert not marker.exists()
    assert cbuild.verified(target)


def test_a_truncated_library_is_rebuilt_not_a_crash(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    good = cbuild.build(native.SOURCE, native.FLAGS, folder)
    data = good.read_bytes()
    good.write_bytes(data[: len(data) // 3])  # the record still names the whole file
    done = _load_in_child(folder)
    assert (done.returncode, done.stdout.strip()) == (0, "on"), done.stderr
    assert good.read_bytes() == data


def test_a_library_without_its_record_is_rebuilt(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    good = cbuild.build(native.SOURCE, native.FLAGS, folder)
    cbuild.record_path(good).unlink()
    assert not cbuild.verified(good)
    assert cbuild.build(native.SOURCE, native.FLAGS, folder) == good and cbuild.verified(good)


def test_the_folder_is_private_even_under_umask_000(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        library = cbuild.build(native.SOURCE, native.FLAGS, tmp_path / "fresh")
    finally:
        os.umask(old)
    assert (tmp_path / "fresh").stat().st_mode & 0o777 == 0o700
    assert library.stat().st_mode & 0o022 == 0 and cbuild.record_path(library).stat().st_mode & 0o022 == 0
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    cbuild.private_folder(open_folder)
    assert open_folder.stat().st_mode & 0o777 == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_a_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)
    assert native.load(folder) == (None, f"off: {folder} belongs to another user; not loading native code from it")


def test_a_library_lacking_a_symbol_is_rebuilt_for_the_next_start(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    target = cbuild.library_path(native.SOURCE, native.FLAGS, folder)
    os.replace(_compile(tmp_path, "void logitscope_swiglu_f32(void) {}\n", "stale"), target)
    cbuild.record_path(target).write_text(cbuild._sha256(target))  # a build recorded as ours, but stale
    why = f"off: {target.name} lacked logitscope_softmax_rows_f32; rebuilding it for the next start"
    assert native.load(folder) == (None, why)
    deadline = time.monotonic() + 60
    while not cbuild.verified(target) and time.monotonic() < deadline:
        time.sleep(0.05)
    done = _load_in_child(folder)  # the next start
    assert done.stdout.strip() == "on", done.stderr


def _hanging_compiler(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "cc"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] in "ZX"  # a zombie is dead too
    except OSError:
        return True


def test_a_hanging_compiler_is_killed_with_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    cc = _hanging_compiler(tmp_path, f"sleep 300 & echo $! > {pids}\necho $$ >> {pids}\nwait")
    started = time.monotonic()
    with pytest.raises(OSError, match=r"^cc took over 0.5 s; stopped it$"):
        cbuild.build(native.SOURCE, native.FLAGS, tmp_path / "cache", str(cc), timeout=0.5)
    assert time.monotonic() - started < 10
    deadline = time.monotonic() + 5
    children = [int(line) for line in pids.read_text().split()]
    while not all(_gone(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(children) == 2 and all(_gone(pid) for pid in children)
    assert not list((tmp_path / "cache").glob(".*.partial"))


def test_a_slow_build_finishes_in_the_background_for_the_next_load(tmp_path: Path) -> None:
    cc = _hanging_compiler(tmp_path, f'sleep 1.5\nexec {cbuild.compiler()} "$@"')
    folder = tmp_path / "cache"
    started = time.monotonic()
    with pytest.raises(cbuild.StillBuilding, match="^native.c is still building in the background$"):
        cbuild.load(native.RECIPE, folder, wait=0.2, cc=str(cc))
    assert time.monotonic() - started < 1.5  # 0.2 s of waiting, with room for a busy machine
    target = cbuild.library_path(native.SOURCE, native.FLAGS, folder)
    deadline = time.monotonic() + 60
    while not cbuild.verified(target) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert native.load(folder)[1] == "on"


def test_leftovers_of_a_killed_build_are_cleaned_up(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    old = folder / ".native-0-x86_64.so.abc.partial"
    old.write_bytes(b"half")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    cbuild.build(native.SOURCE, native.FLAGS, folder)
    assert not old.exists()


def test_a_stale_forwarder_is_off_and_never_global(tmp_path: Path) -> None:
    openblas = next((lib for path in blas.candidate_paths()
                     if (lib := _open_local(path)) is not None and hasattr(lib, "cblas_sgemv")), None)
    if openblas is None:
        pytest.skip("no usable OpenBLAS here")
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    target = gemv_forward.library_path(folder)
    os.replace(_compile(tmp_path, "void cblas_sgemm(void) {}\n", "old-forwarder"), target)
    cbuild.record_path(target).write_text(cbuild._sha256(target))
    forwarding = gemv_forward.install(openblas, folder)
    assert not forwarding.active and "lacked logitscope_gemv_forward_init" in forwarding.reason
    assert blas.resolved_cblas_path() != str(target.resolve())


def _open_local(path: str) -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    except OSError:
        return None


def test_kernels_built_in_the_background_serve_the_next_model_load(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cbuild, "default_folder", lambda: tmp_path / "cache")
    monkeypatch.setattr(cbuild, "STARTUP_WAIT_S", 0.2)
    monkeypatch.setenv("CC", str(_hanging_compiler(tmp_path, f'sleep 1\nexec {cbuild.compiler()} "$@"')))
    process = native._ProcessKernels()
    assert process.get() == (None, "off: native.c is still building in the background (on from the next model load)")
    target = cbuild.library_path(native.SOURCE, native.FLAGS, tmp_path / "cache")
    deadline = time.monotonic() + 60
    while not cbuild.verified(target) and time.monotonic() < deadline:
        time.sleep(0.05)
    kernels, status = process.get()
    assert status == "on" and kernels is not None


def test_a_library_that_crashes_at_load_is_rebuilt_not_crashed_on_again(tmp_path: Path) -> None:
    """#29.6: truncated, its record rewritten to match: the hash passes, dlopen maps past the
    end (SIGBUS). Whatever the first start does, the next one rebuilds and runs."""
    folder = tmp_path / "cache"
    good = cbuild.build(native.SOURCE, native.FLAGS, folder)
    data = good.read_bytes()
    good.write_bytes(data[: len(data) // 3])
    cbuild.record_path(good).write_text(cbuild._sha256(good) + "\n")  # recorded as ours
    first = _load_in_child(folder)
    assert first.returncode in (0, -7), first.stderr  # on, off, or killed by SIGBUS: once
    done = _load_in_child(folder)  # the next start
    deadline = time.monotonic() + 60
    while done.returncode == 0 and done.stdout.strip() != "on" and time.monotonic() < deadline:
        time.sleep(0.2)  # rebuilding in the background, for the start after
        done = _load_in_child(folder)
    assert (done.returncode, done.stdout.strip()) == (0, "on"), done.stderr
    assert good.read_bytes() == data


def test_a_library_the_loader_refuses_is_rebuilt_for_the_next_start(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    good = cbuild.build(native.SOURCE, native.FLAGS, folder)
    good.write_bytes(b"not an ELF file at all" * 100)
    cbuild.record_path(good).write_text(cbuild._sha256(good) + "\n")
    kernels, status = native.load(folder)
    assert kernels is None and status.startswith(f"off: {good.name} could not be loaded (")
    assert "rebuilding it for the next start" in status and "\n" not in status
    deadline = time.monotonic() + 60
    while not cbuild.verified(good) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _load_in_child(folder).stdout.strip() == "on"
