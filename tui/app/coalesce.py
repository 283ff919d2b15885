"""`Coalesced`: a signal sent at most so many times a second, the last one never lost.

Why: a fast stream (hundreds of tokens a second) would otherwise cost the screen a repaint per
token; coalesced, it costs `hz` repaints a second, and the newest state is always drawn: a
signal asked for too soon is sent once the interval is up, not dropped.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable


class Coalesced:
    """Calls `send` now when the last call is old enough, else once the interval is up."""

    def __init__(self, send: Callable[[], object], hz: float) -> None:
        self._send = send
        self._interval = 1.0 / hz
        self._last = 0.0
        self._handle: asyncio.TimerHandle | None = None

    def ask(self) -> None:
        """Send now, or schedule one send for when the interval is up (one at most)."""
        wait = self._last + self._interval - time.monotonic()
        if wait <= 0:
            self._fire()
        elif self._handle is None:
            self._handle = asyncio.get_running_loop().call_later(wait, self._fire)

    def cancel(self) -> None:
        """Drop a scheduled send (the stream ended: its end says the rest)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _fire(self) -> None:
        self._handle = None
        self._last = time.monotonic()
        self._send()
