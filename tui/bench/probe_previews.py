"""``python -m tui.bench.probe_app previews --model FOLDER``: key -> screen while previews compute.

The real Engine in the app: one reply, the token cursor put on its middle token, previews asked
at once ([preview] delay_ms 0) and long (256 tokens each, so they are still computing for every
press), then `u` (percent / log p, which redraws the candidates panel and leaves the cursor
where it is) pressed as the terminal driver delivers it; each press is timed until the panel's
head changes on screen. The engine thread computes the previews meanwhile: the app's loop must
stay free.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from textual import events

from engine.core.settings import load_config
from tui.app.application import LogitscopeApp

SIZE = (120, 36)
CONFIG = "[preview]\ndelay_ms = 0\ntokens = 256\n"


def _screen_text(app: LogitscopeApp) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def _until(condition: Any, timeout: float = 60.0, every: float = 0.001) -> float:
    """Poll `condition`; the time it became true (perf_counter)."""
    import asyncio

    end = time.perf_counter() + timeout
    while not condition():
        if time.perf_counter() > end:
            raise TimeoutError("the app did not get there in time")
        await asyncio.sleep(every)
    return time.perf_counter()


async def key_latency_while_previewing(folder: str, presses: int) -> dict[str, float]:
    """Median and worst key -> screen (ms) while previews compute, and how many presses counted."""
    from engine.local.client import Engine

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.toml").write_text(CONFIG, encoding="utf-8")
        app = LogitscopeApp(Engine(), load_config(Path(tmp) / "config.toml"), model=folder,
                            config_dir=Path(tmp) / "cfg", save_dir=Path(tmp))
        async with app.run_test(size=SIZE) as pilot:
            await _until(lambda: app.engine.model is not None, timeout=120)
            app.controller.set_params(app.controller.params.with_changes(max_tokens=24, temperature=0.0))
            app.screen.query_one("ChatInput").focus()
            await pilot.press(*"tell me a story", "enter")
            await _until(lambda: not app.controller.busy and bool(app.controller.conversation.path()))
            await pilot.press("escape", "right", "home", *["right"] * 8)
            return await _presses(app, presses)


async def _presses(app: LogitscopeApp, presses: int) -> dict[str, float]:
    """Press `u` while previews compute (asked again, uncached, whenever they have finished);
    time each press until the candidates panel's head flips."""
    screen: Any = app.screen
    found: list[float] = []
    for _ in range(presses):
        await _computing(screen)
        logs = "log raw" in _screen_text(app)
        start = time.perf_counter()
        app.post_message(events.Key("u", "u"))
        seen = await _until(lambda: ("log raw" in _screen_text(app)) != logs, timeout=10, every=0.005)
        found.append((seen - start) * 1e3)
    return {"key_ms_median": statistics.median(found), "key_ms_max": max(found), "presses": len(found)}


async def _computing(screen: Any) -> None:
    """Until previews of the token under the cursor are being computed (asked afresh if done)."""
    previews = screen.previews
    task = previews._task
    if task is None or task.done():
        previews.drop()
        previews.rest_on(screen.preview_actions.shown)
        await _until(lambda: previews._task is not None, timeout=30)
