"""`python -m tui.bench.probe_long_chat`: how long a 2,000-message chat takes to open and to quit
(issue #29, item 19), as one JSON line, for `logitscope bench --sections library`.

A scratch library holds one chat of 1,000 questions and 1,000 replies (4 tokens with 10
candidates each). In a headless app with the scripted engine: Ctrl+G, Enter on the chat, and the
time until its last reply is painted and the app is idle again; then the time `exit` takes. The
keys are posted as the terminal driver posts them (pilot.press would wait for idle itself). CPU
seconds (all threads) are reported beside the wall-clock ones: on a busy machine they blur less.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from textual import events

from engine.core.library import Library
from engine.core.settings import load_config
from engine.scripted import ScriptedEngine
from tui.app.application import LogitscopeApp
from tui.app.screens.library import LibraryScreen
from tui.bench.chat_documents import chat_document

EXCHANGES = 1000


async def _until(check: Any, timeout: float = 60.0, every: float = 0.005) -> float:
    """Poll `check`; the time it became true (perf_counter)."""
    end = time.perf_counter() + timeout
    while not check():
        if time.perf_counter() > end:
            raise TimeoutError("the app did not answer")
        await asyncio.sleep(every)
    return time.perf_counter()


def _screen_text(app: LogitscopeApp) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def measure(folder: Path) -> dict[str, Any]:
    library_path = folder / "library.sqlite3"
    document = chat_document(random.Random(3), EXCHANGES, 4)
    library = Library(library_path)
    library.save(document, model_spec="bench")
    library.close()
    last_words = document["nodes"][-2]["versions"][0]["text"][:40]  # the last question, as typed
    app = LogitscopeApp(ScriptedEngine(), load_config(folder / "config.toml"), config_dir=folder / "cfg",
                        save_dir=folder, library_path=library_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await _until(lambda: app.engine.model is not None)
        await pilot.pause()
        app.post_message(events.Key("ctrl+g", None))
        await _until(lambda: isinstance(app.screen, LibraryScreen) and bool(app.screen.entries))
        await pilot.pause()
        start, cpu_start = time.perf_counter(), time.process_time()
        app.post_message(events.Key("enter", None))
        painted = await _until(lambda: not isinstance(app.screen, LibraryScreen)
                               and len(app.controller.conversation.path()) == 2 * EXCHANGES
                               and last_words in _screen_text(app))
        await pilot.pause()
        settled, open_cpu = time.perf_counter(), time.process_time() - cpu_start
        quit_start, quit_cpu = time.perf_counter(), time.process_time()
    quit_s, quit_cpu = time.perf_counter() - quit_start, time.process_time() - quit_cpu
    return {"messages": 2 * EXCHANGES, "open_painted_s": painted - start, "open_settled_s": settled - start,
            "open_cpu_s": open_cpu, "quit_s": quit_s, "quit_cpu_s": quit_cpu}


def main() -> None:
    argparse.ArgumentParser(prog="python -m tui.bench.probe_long_chat").parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(asyncio.run(measure(Path(tmp)))))


if __name__ == "__main__":
    main()
