"""One engine process as the app holds it: its pipes, the thread reading its answers, the tail of
its standard error (the reason a crash gives), and the one line that says how it ended.

Apart from `engine.process.client` (which routes calls and answers over it) so that each file
keeps one job: this one knows processes and pipes, that one knows the engine's API.
"""

from __future__ import annotations

import subprocess
import threading
from collections import deque
from typing import Any, Callable

from engine.core.text import printable
from engine.process.setup import EngineSetup
from engine.process.wire import WireClosed, encode, read_frame

STDERR_TAIL = 20  # lines of the child's standard error kept for the message if it dies

Deliver = Callable[[Any], None]


class RunningProcess:
    """One engine process: its pipes, the thread reading its answers, the tail of its stderr."""

    def __init__(self, process: "subprocess.Popen[bytes]", setup: EngineSetup, arrived: Deliver,
                 died: Callable[["RunningProcess", str], None]) -> None:
        self.process = process
        self._write = threading.Lock()
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL)
        self._gone = ""
        self.alive = True
        self._died = died
        self.send(encode(setup))
        threading.Thread(target=self._read, args=(arrived,), name="logitscope-engine-answers", daemon=True).start()
        threading.Thread(target=self._drain_stderr, name="logitscope-engine-stderr", daemon=True).start()

    def send(self, data: bytes) -> bool:
        stdin = self.process.stdin
        assert stdin is not None
        with self._write:
            try:
                stdin.write(data)
                stdin.flush()
                return True
            except (OSError, ValueError):
                return False

    def wait(self, timeout: float) -> None:
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def kill(self) -> None:
        self.alive = False
        if self.process.poll() is None:
            self.process.kill()
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
        except OSError:  # a broken pipe: the process is gone already
            pass

    def why_gone(self) -> str:
        return self._gone or "The engine process has ended."

    def _read(self, arrived: Deliver) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while True:
                frame = read_frame(stdout)
                if frame == ("closed",):
                    break
                arrived(frame)
        except (WireClosed, OSError, EOFError, ValueError, AttributeError, ImportError):
            pass
        self.alive = False
        status = self.process.wait()
        self._gone = _death_line(status, self._stderr)
        self._died(self, self._gone)

    def _drain_stderr(self) -> None:
        """Keep the last lines (the reason a crash gives); reading also keeps the pipe from filling."""
        stderr = self.process.stderr
        assert stderr is not None
        for line in stderr:
            text = printable(line.decode("utf-8", "replace").strip())
            if text:
                self._stderr.append(text)


def _death_line(status: int, stderr: deque[str]) -> str:
    how = f"killed by signal {-status}" if status < 0 else f"exit status {status}"
    said = stderr[-1] if stderr else ""
    hint = " (out of memory?)" if status == -9 else ""
    return f"The engine process ended ({how}{hint}){': ' + said if said else ''}. Load a model to go on."
