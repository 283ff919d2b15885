"""The interpreter settings the app runs with while it streams (`tune_for_streaming`)."""

from __future__ import annotations

import gc
import sys

from tui.app.application import GIL_SWITCH_S, tune_for_streaming


def test_the_engine_thread_gets_the_gil_within_half_a_millisecond() -> None:
    """At Python's 5 ms switch interval the engine thread waited up to 5 ms for the GIL while the
    screen drew: the 30M model decoded at 90 tok/s in the app against 119 at 0.5 ms."""
    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    try:
        tune_for_streaming()
        assert sys.getswitchinterval() == GIL_SWITCH_S <= 0.001
        assert gc.get_threshold()[0] >= 10_000
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*thresholds)
