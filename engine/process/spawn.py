"""Starting the engine process, apart from what it will be told to build (#30.8).

Why apart: the child's own start (Python, then its modules: 0.1 s here) and the app's reading of
its config and flags (0.08 s) used to run one after the other, because the process was started
only once its set-up (the config's model settings) was known. Started first, it imports while
the app reads the config, and waits for its set-up frame (`engine.process.client` sends it). If
the config then says the engine is not local (a server), the process is discarded unused.

This module imports only the standard library's process tools: it runs before anything else.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


class Spawned:
    """An engine process started and not yet told what to build."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.taken = False

    def take(self) -> subprocess.Popen[bytes]:
        """Hand the process to the engine that will send its set-up (once)."""
        if self.taken:
            raise RuntimeError("this engine process was already taken")
        self.taken = True
        return self.process

    def discard(self) -> None:
        """Not wanted (the engine is remote, or the flags were refused): end it now. Closing its
        input is enough (it ends at the end of input); the kill makes sure."""
        if self.taken:
            return
        self.taken = True
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
        except OSError:
            pass
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def spawn(python: str = sys.executable) -> Spawned:
    """Start ``python -m engine.process`` with pipes for its frames and its standard error."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # where `engine` is: the child imports the same code
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    process = subprocess.Popen([python, "-m", "engine.process"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env,
                               start_new_session=True)  # the terminal's signals are the app's
    return Spawned(process)
