"""`tui.app.coalesce.Coalesced`: a burst of asks costs one send now and one when the interval is
up (the newest state is never dropped); a cancel drops the one scheduled."""

from __future__ import annotations

import asyncio

from tui.app.coalesce import Coalesced


async def test_a_burst_sends_at_once_then_once_more_after_the_interval() -> None:
    sent: list[float] = []
    loop = asyncio.get_running_loop()
    coalesced = Coalesced(lambda: sent.append(loop.time()), hz=20.0)
    start = loop.time()
    for _ in range(100):
        coalesced.ask()
    assert len(sent) == 1  # the first at once
    await asyncio.sleep(0.12)
    assert len(sent) == 2 and sent[1] - start >= 0.045  # the rest, once, after ~1/20 s


async def test_a_cancel_drops_the_scheduled_send() -> None:
    sent: list[int] = []
    coalesced = Coalesced(lambda: sent.append(1), hz=20.0)
    coalesced.ask()
    coalesced.ask()
    coalesced.cancel()
    await asyncio.sleep(0.1)
    assert sent == [1]
