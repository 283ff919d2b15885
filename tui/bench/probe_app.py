"""``python -m tui.bench.probe_app``: the TUI's speed numbers for ``logitscope bench``.

tui/bench may not import Textual, so it runs this module in a subprocess and reads one JSON
line from it.

Modes (one JSON object on stdout):
- ``stream``: a ScriptedEngine emits a long reply as fast as the event loop allows; reports the
  tokens/s the app sustained end to end and the backlog (how long after the engine finished the
  screen had handled the finish), plus key-press-to-screen latency while a reply streams.
- start-up is `tui.bench.probe_startup` (it must not import Textual before the app would).
- ``app --model FOLDER``: the real Engine inside the app, as a person drives it (type, pause,
  Enter): Enter to the first token reaching the app, the engine's own TTFT for the same turns,
  and decode speed while the app draws. On a small machine the app's drawing takes CPU the
  engine needs; these rows show how much.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from textual import events

from engine.core.settings import load_config
from engine.scripted import ScriptedEngine
from tui.app.application import LogitscopeApp, tune_for_streaming
from engine.core.chat.conversation import TurnStats
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.status_bar import StatusBar

SIZE = (120, 36)


def _app(engine: Any, folder: Path) -> LogitscopeApp:
    return LogitscopeApp(engine, load_config(folder / "config.toml"), config_dir=folder / "cfg", save_dir=folder)


def _screen_text(app: LogitscopeApp) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())  # noqa: SLF001


async def _until(condition: Any, timeout: float = 60.0, every: float = 0.001) -> float:
    """Poll `condition`; the time it became true (perf_counter)."""
    end = time.perf_counter() + timeout
    while not condition():
        if time.perf_counter() > end:
            raise TimeoutError("the app did not get there in time")
        await asyncio.sleep(every)
    return time.perf_counter()


def _reply_tokens(app: LogitscopeApp) -> int:
    path = app.controller.conversation.path()
    return len(path[-1].version.tokens or []) if path and path[-1].role == "assistant" else 0


async def stream(tokens: int, presses: int) -> dict[str, float]:
    """Throughput with a firehose engine, then key latency under a steady 500 tok/s stream."""
    reply = [f" w{i}" for i in range(tokens)]
    with tempfile.TemporaryDirectory() as folder:
        engine = ScriptedEngine([reply], token_delay=1e-6)
        app = _app(engine, Path(folder))
        async with app.run_test(size=SIZE) as pilot:
            await _until(lambda: app.engine.model is not None)
            app.controller.set_params(app.controller.params.with_changes(max_tokens=tokens + 1))
            app.screen.query_one("ChatInput").focus()
            await pilot.press("g", "o")
            start = time.perf_counter()
            await pilot.press("enter")
            done = await _until(lambda: not app.controller.busy and _reply_tokens(app) >= tokens)
            handled = await _until(lambda: "generating" not in str(app.screen.query_one(StatusBar).state))
            rate = tokens / (done - start)
            backlog = handled - done
            engine.token_delay = 0.002  # ~500 tok/s: a fast real model
            latencies = await _key_latencies(app, pilot, presses)
    return {"stream_tps": rate, "backlog_s": backlog, "key_ms_median": statistics.median(latencies),
            "key_ms_max": max(latencies), "tokens": tokens, "presses": presses}


async def _key_latencies(app: LogitscopeApp, pilot: Any, presses: int) -> list[float]:
    """Type letters into the input while a reply streams; time until each shows on screen."""
    box = app.screen.query_one(ChatInput)
    await pilot.press("x", "enter")
    await _until(lambda: app.controller.busy, timeout=10)
    box.focus()
    found: list[float] = []
    for i in range(presses):
        box.text = "q" * (i + 1)
        await pilot.pause()
        marker = "q" * (i + 2)
        start = time.perf_counter()
        app.post_message(events.Key("q", "q"))  # as the terminal driver delivers it (pilot.press waits for idle)
        # Poll every 5 ms: rendering the whole screen to look costs time the app then lacks.
        seen = await _until(lambda: marker in _screen_text(app), timeout=10, every=0.005)
        found.append((seen - start) * 1e3)
        if not app.controller.busy:
            break
    app.controller.stop()
    return found


async def in_app(folder: str, turns: int, tokens: int) -> dict[str, float]:
    """One-token turns (Enter -> first token, against the engine's own TTFT), then one reply of
    `tokens` tokens for the decode speed the engine keeps while the app draws it."""
    from engine.local.client import Engine

    with tempfile.TemporaryDirectory() as tmp:
        app = LogitscopeApp(Engine(), load_config(Path(tmp) / "config.toml"), model=folder,
                            config_dir=Path(tmp) / "cfg", save_dir=Path(tmp))
        async with app.run_test(size=SIZE) as pilot:
            await _until(lambda: app.engine.model is not None, timeout=120)
            # The decode section's sampling (temperature 0.7, top-p 0.9, 10 candidates).
            app.controller.set_params(app.controller.params.with_changes(max_tokens=1, temperature=0.7, top_p=0.9,
                                                                         candidates=10))
            first, own = [], []
            for turn in range(turns):
                start, sent = await _send_typed(app, pilot, f"tell me more about the number {turn}")
                first.append((await _until(lambda: _new_tokens(app, sent) >= 1, every=0.0005) - start) * 1e3)
                own.append((await _finished_stats(app)).ttft_s * 1e3)
            app.controller.set_params(app.controller.params.with_changes(max_tokens=tokens))
            _, sent = await _send_typed(app, pilot, "and then?")
            await _until(lambda: _new_tokens(app, sent) >= 1)
            decode = (await _finished_stats(app)).decode_tps
    return {"first_token_ms": statistics.median(first), "engine_ttft_ms": statistics.median(own),
            "decode_tps": decode, "turns": turns}


async def _send_typed(app: LogitscopeApp, pilot: Any, text: str) -> tuple[float, int]:
    """Type `text`, pause as a person does (the app reads the draft ahead), press Enter as the
    terminal driver delivers it; returns that moment and how long the path was before."""
    box = app.screen.query_one(ChatInput)
    box.focus()
    await pilot.press(*text)
    await asyncio.sleep(0.6)
    await _until(lambda: not app.controller.busy)
    before = len(app.controller.conversation.path())
    start = time.perf_counter()
    app.post_message(events.Key("enter", "\r"))
    return start, before


def _new_tokens(app: LogitscopeApp, before: int) -> int:
    """Tokens of the reply to the message sent when the path was `before` nodes long."""
    return _reply_tokens(app) if len(app.controller.conversation.path()) > before else 0


async def _finished_stats(app: LogitscopeApp) -> TurnStats:
    """Wait for the turn to end; the engine's measurements of it (TTFT, decode speed)."""
    await _until(lambda: not app.controller.busy and app.controller.conversation.path()[-1].version.stats is not None)
    stats = app.controller.conversation.path()[-1].version.stats
    assert stats is not None
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.bench.probe_app")
    parser.add_argument("mode", choices=("stream", "app", "previews"))
    parser.add_argument("--model", default="")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=4000)
    parser.add_argument("--presses", type=int, default=10)
    args = parser.parse_args(argv)
    tune_for_streaming()  # as `logitscope` itself does
    if args.mode == "stream":
        result = asyncio.run(stream(args.tokens, args.presses))
    elif args.mode == "app":
        result = asyncio.run(in_app(args.model, args.turns, args.tokens))
    elif args.mode == "previews":
        from tui.bench.probe_previews import key_latency_while_previewing

        result = asyncio.run(key_latency_while_previewing(args.model, args.presses))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
