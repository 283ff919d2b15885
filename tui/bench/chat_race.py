"""How long ``mlx_lm.chat`` takes to be ready on a model: from the command to its prompt (the
header it prints once the model is loaded), for the bench's start-up race against logitscope on
the same model. A subprocess read through a pipe; "q" ends it."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

READY_MARK = b"mlx_lm.chat"  # the title of the panel it prints after the load, before its prompt


def mlx_chat_ready_s(model: str, timeout_s: float = 300.0) -> float:
    """Seconds from spawning ``python -m mlx_lm chat --model MODEL`` to its ready header."""
    start = time.time()
    process = subprocess.Popen([sys.executable, "-m", "mlx_lm", "chat", "--model", model], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None and process.stdin is not None
    seen = b""
    try:
        while READY_MARK not in seen:
            left = start + timeout_s - time.time()
            ready, _, _ = select.select([process.stdout], [], [], max(0.0, left))
            chunk = os.read(process.stdout.fileno(), 65536) if ready else b""
            if not chunk:
                raise RuntimeError(f"mlx_lm.chat ended or stalled before its prompt: {seen[-200:]!r}")
            seen += chunk
        ready_s = time.time() - start
        process.stdin.write(b"q\n")
        process.stdin.flush()
        process.wait(timeout=30)
        return ready_s
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
