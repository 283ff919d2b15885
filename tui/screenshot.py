"""Save an SVG of a scripted session for the README: ``python -m tui.screenshot [OUT.svg]``.

Runs the app headless on the scripted engine (no model needed), sends a message, selects the
least likely token of the reply with the heatmap on, and saves the screen.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from engine.config import load_config
from engine.fake import ScriptedEngine
from tui.app import LogitscopeApp


async def take(path: Path, size: tuple[int, int] = (120, 36)) -> Path:
    """Drive a session and write its SVG to `path`; returns the path."""
    with tempfile.TemporaryDirectory() as tmp:
        loaded = load_config(Path(tmp) / "config.toml")
        app = LogitscopeApp(ScriptedEngine(), loaded, config_dir=Path(tmp), save_dir=Path(tmp))
        async with app.run_test(size=size) as pilot:
            while app.engine.model is None:
                await asyncio.sleep(0.01)
            await pilot.press(*"Say hello", "enter")
            while app.controller.busy or app.controller.conversation.root is None:
                await asyncio.sleep(0.01)
            await pilot.pause()
            await pilot.press("f3", "escape", "right", "home", "n")
            await pilot.pause()
            app.save_screenshot(filename=path.name, path=str(path.parent.resolve()))
    return path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "logitscope.svg")
    print(asyncio.run(take(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
