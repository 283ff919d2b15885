"""#30.8 start-up: the engine thread starts (and imports MLX and mlx-lm) before Textual is even
imported, so the model is ready sooner; and a first frame is painted at once in a terminal,
before the seconds Textual's import and first layout take on a busy machine."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SPY = """
import sys, threading
seen = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "textual" and not seen:
            seen.append(sorted(t.name for t in threading.enumerate()))
        return None
sys.meta_path.insert(0, Spy())
from tui.main import build_app, parse_args
app = build_app(parse_args(["--model", "demo"]))
print("engine thread when Textual was imported:", "logitscope-engine" in seen[0])
app.engine._worker.stop(30)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_STATE_HOME": str(tmp_path / "state"),
            "LOGITSCOPE_KV_CACHE": "off"}


def test_the_engine_thread_is_importing_before_textual_is(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", SPY], cwd=ROOT, env=_env(tmp_path), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-800:]
    assert "engine thread when Textual was imported: True" in done.stdout


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
