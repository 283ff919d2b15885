"""Save an SVG of a session for the README: ``python -m tui.app.screenshot [OUT.svg] [--scripted]``.

By default it is a real session: the real engine on the embedded demo model, asked for the
capital of France, with the token cursor on the capital so the candidates panel shows the other
capitals the model considered, and the heatmap on. ``--scripted`` uses the scripted engine
instead (no model needed; what the tests use).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from engine.core.api import EngineAPI
from engine.core.settings import load_config
from engine.scripted import ScriptedEngine
from tui.app.application import LogitscopeApp

QUESTION = "What is the capital of France?"
FOCUS_WORD = "Paris"


def _focus_index(app: LogitscopeApp) -> int:
    """Index of the reply token where `FOCUS_WORD` starts (the last token when it is absent)."""
    tokens = app.controller.conversation.path()[-1].version.tokens or []
    start = "".join(t.piece for t in tokens).find(FOCUS_WORD)
    end = 0
    for i, token in enumerate(tokens):
        end += len(token.piece)
        if start != -1 and end > start:
            return i
    return max(len(tokens) - 1, 0)


async def take(path: Path, engine: EngineAPI, question: str, size: tuple[int, int] = (120, 36)) -> Path:
    """Drive a session and write its SVG to `path`; returns the path."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text("[sampling]\nseed = 2\n", encoding="utf-8")  # the same reply every time
        loaded = load_config(config)
        app = LogitscopeApp(engine, loaded, config_dir=Path(tmp), save_dir=Path(tmp))
        async with app.run_test(size=size) as pilot:
            while app.engine.model is None:
                await asyncio.sleep(0.01)
            await pilot.press(*question, "enter")
            await pilot.pause()
            while app.controller.busy or app.controller.conversation.root is None:
                await asyncio.sleep(0.01)
            await pilot.pause(0.5)  # let the finished reply settle on screen
            await pilot.press("escape")  # to the transcript (its own press: focus moves first)
            await pilot.press("right", "home", *["right"] * _focus_index(app))
            await pilot.press("f3")
            await pilot.pause()
            app.save_screenshot(filename=path.name, path=str(path.parent.resolve()))
    return path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    scripted = "--scripted" in args
    names = [a for a in args if not a.startswith("--")]
    out = Path(names[0] if names else "logitscope.svg")
    if scripted:
        engine: EngineAPI = ScriptedEngine()
        print(asyncio.run(take(out, engine, "Say hello")))
    else:
        from engine.factory import local_engine

        print(asyncio.run(take(out, local_engine(), QUESTION)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
