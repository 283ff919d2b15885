"""`python -m tui.bench.probe_library --library PATH`: the library screen's speed on a given database,
as one JSON line (for `logitscope bench --sections library`): Ctrl+G -> the list painted, and
each key typed in the filter -> its rows painted, in a headless app with the scripted engine."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from textual import events

from engine.scripted import ScriptedEngine
from engine.core.settings import load_config
from tui.app.application import LogitscopeApp
from tui.app.screens.library import LibraryScreen

TYPED = "penguin volcano"


async def _until(check: Any, timeout: float = 30.0, every: float = 0.001) -> float:
    """Poll `check`; the time it became true (perf_counter)."""
    end = time.perf_counter() + timeout
    while not check():
        if time.perf_counter() > end:
            raise TimeoutError("the library screen did not answer")
        await asyncio.sleep(every)
    return time.perf_counter()


def _painted(app: LogitscopeApp, before: int) -> bool:
    """The newest query's rows are set and the first one is on the screen (poll every 5 ms:
    rendering the screen to look costs time the app then lacks)."""
    screen = app.screen
    if not isinstance(screen, LibraryScreen) or screen.shown <= before or screen.shown != screen.generation:
        return False
    if not screen.entries:
        return True
    text = "\n".join(strip.text for strip in screen._compositor.render_strips())
    return screen.entries[0].title[:30] in text


async def _key(app: LogitscopeApp, key: str, character: str | None) -> float:
    """Post the key as the terminal driver does (pilot.press waits for idle); ms to painted rows."""
    before = app.screen.generation if isinstance(app.screen, LibraryScreen) else 0
    start = time.perf_counter()
    app.post_message(events.Key(key, character))
    seen = await _until(lambda: _painted(app, before), every=0.005)
    return (seen - start) * 1e3


async def measure(library: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        app = LogitscopeApp(ScriptedEngine(), load_config(folder / "config.toml"), config_dir=folder / "cfg",
                            save_dir=folder, library_path=library)
        async with app.run_test(size=(120, 36)) as pilot:
            await _until(lambda: app.engine.model is not None)
            await pilot.pause()
            open_ms = await _key(app, "ctrl+g", None)
            keys = [await _key(app, "space" if char == " " else char, char) for char in TYPED]
            await pilot.press("escape")
    return {"open_ms": open_ms, "key_ms_median": statistics.median(keys), "key_ms_max": max(keys)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tui.bench.probe_library")
    parser.add_argument("--library", type=Path, required=True)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.library))))


if __name__ == "__main__":
    main()
