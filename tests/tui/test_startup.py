"""#30.8 start-up: a first frame is painted at once in a terminal, before the seconds Textual's
import and first layout take on a busy machine."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_STATE_HOME": str(tmp_path / "state"),
            "LOGITSCOPE_KV_CACHE": "off"}


def test_a_first_frame_is_painted_before_textual_starts(tmp_path: Path) -> None:
    """In a real terminal (a pty): the splash comes before Textual's first output (it turns
    mouse reporting on), and names the model being loaded."""
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "tui.main", "--fake-engine", "--model", "demo"], cwd=ROOT,
                               env={**_env(tmp_path), "TERM": "xterm-256color"}, stdin=follower, stdout=follower,
                               stderr=follower, start_new_session=True)
    os.close(follower)
    seen = b""
    try:
        end = time.monotonic() + 120
        while b"\x1b[?1000h" not in seen and time.monotonic() < end:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if ready:
                try:
                    seen += os.read(leader, 65536)
                except OSError:
                    break
    finally:
        process.kill()
        process.wait()
        os.close(leader)
    assert b"starting" in seen and b"\x1b[?1000h" in seen, seen[-300:]
    assert seen.index(b"starting") < seen.index(b"\x1b[?1000h")
    assert b"demo" in seen[: seen.index(b"\x1b[?1000h")]
