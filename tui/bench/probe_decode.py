"""``python -m tui.bench.probe_decode --model PATH``: the app's own cost while it decodes (#31.3).

The same model, prompt, seed and settings, alternately in two fresh processes a round:

- **headless**: ``logitscope run --json`` (its tokens and candidates printed as JSON lines to a
  file), the speed its closing turn record reports;
- **app**: the TUI, headless under Textual's Pilot at the given size (every frame composed and
  rendered as for a terminal, only not written to one), the candidates panel following the
  newest token and the heatmap on; the speed the status bar shows for that reply.

Both numbers are the engine's **decode tok/s**, the one the status bar prints: the reply's tokens
after the first, divided by the time from the first token to the last, as the engine thread
timed them (`engine.local.turn`: ``(reads - 1) / (last_at - first_at)``). What the app costs
shows there because drawing takes the CPU and the GIL the engine thread needs between its
forward passes. Rounds alternate which process goes first. One JSON line on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROMPT = "Once upon a time there was a little robot who wanted to learn every word of the ocean"
CONFIG = """[sampling]
seed = {seed}
max_tokens = {tokens}
[ui]
heatmap = true
show_candidates = true
score_chat = false
"""


def _config(folder: Path, tokens: int, seed: int) -> Path:
    path = folder / "config.toml"
    path.write_text(CONFIG.format(seed=seed, tokens=tokens), encoding="utf-8")
    return path


def headless_tps(model: str, tokens: int, seed: int) -> float:
    """``logitscope run --json`` in a fresh process: its turn record's decode speed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.jsonl"
        config = _config(Path(tmp), tokens, seed)
        with out.open("w", encoding="utf-8") as sink:
            subprocess.run([sys.executable, "-m", "tui.headless", "run", "--model", model, "--prompt", PROMPT,
                            "--json", "--config", str(config)], stdout=sink, stderr=subprocess.DEVNULL,
                           check=True, timeout=600, env={**os.environ, "XDG_DATA_HOME": tmp})
        turns = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if '"turn"' in line]
        done = [t for t in turns if t.get("type") == "turn"][-1]
        return float(done["decode_tps"])


def app_tps(model: str, tokens: int, seed: int, size: str) -> dict[str, Any]:
    """The app in a fresh process (this module with ``--in-app``): its status bar's decode speed."""
    done = subprocess.run([sys.executable, "-m", "tui.bench.probe_decode", "--in-app", "--model", model,
                           "--tokens", str(tokens), "--seed", str(seed), "--size", size],
                          capture_output=True, text=True, check=True, timeout=600)
    return json.loads(done.stdout.strip().splitlines()[-1])


async def _in_app(model: str, tokens: int, seed: int, size: tuple[int, int]) -> dict[str, Any]:
    """Send the prompt as a person would, wait for the reply, read the status bar's numbers."""
    from textual import events

    from engine.core.settings import load_config
    from engine.factory import EngineChoice, build_engine
    from tui.app.application import LogitscopeApp, tune_for_streaming
    from tui.launch import engine_in_process
    from tui.app.widgets.chat_input import ChatInput

    tune_for_streaming()  # as `logitscope` itself does
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(_config(Path(tmp), tokens, seed))
        engine = build_engine(config.config, EngineChoice(own_process=not engine_in_process(), threads_in_use=True))  # as `logitscope`
        app = LogitscopeApp(engine, config, model=model, config_dir=Path(tmp) / "cfg", save_dir=Path(tmp))
        async with app.run_test(size=size) as pilot:
            await _until(lambda: app.engine.model is not None, 300)
            app.screen.query_one(ChatInput).focus()
            await pilot.press(*PROMPT)
            await asyncio.sleep(0.5)
            await _until(lambda: not app.controller.busy, 60)
            app.post_message(events.Key("enter", "\r"))
            await _until(lambda: app.controller.busy, 60)
            await _until(lambda: not app.controller.busy and app.controller.conversation.path()[-1].version.stats
                         is not None, 600)
            stats = app.controller.conversation.path()[-1].version.stats
            bar = app.screen.query_one("StatusBar")
            try:  # the status bar takes the finished turn's numbers on the next message
                await _until(lambda: getattr(bar, "stats", None) is stats, 5)
            except TimeoutError:
                pass
            shown = getattr(bar, "stats", None)
    assert stats is not None
    return {"decode_tps": stats.decode_tps, "tokens": stats.generated_tokens,
            "status_bar_shows": shown is stats}


async def _until(condition: Any, timeout: float) -> None:
    end = time.perf_counter() + timeout
    while not condition():
        if time.perf_counter() > end:
            raise TimeoutError("the app did not get there in time")
        await asyncio.sleep(0.01)


def race(model: str, tokens: int, rounds: int, size: str) -> dict[str, Any]:
    """Alternating rounds (the app first on even rounds); medians and the per-round ratio."""
    head: list[float] = []
    app: list[float] = []
    loads: list[float] = []
    shown = True
    for round_ in range(rounds):
        seed = 1000 + round_
        order = ("app", "headless") if round_ % 2 == 0 else ("headless", "app")
        for who in order:
            loads.append(os.getloadavg()[0])
            if who == "app":
                result = app_tps(model, tokens, seed, size)
                app.append(result["decode_tps"])
                shown = shown and bool(result["status_bar_shows"])
            else:
                head.append(headless_tps(model, tokens, seed))
    ratios = [a / h for a, h in zip(app, head)]
    return {"model": model, "size": size, "tokens": tokens, "headless_tps": head, "app_tps": app,
            "ratio_median": statistics.median(ratios), "ratios": ratios, "load_averages": loads,
            "status_bar_shows_it": shown}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.bench.probe_decode")
    parser.add_argument("--model", required=True, help="a model folder or .gguf file")
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", default="160x50", help="the terminal's columns x rows")
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--in-app", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.in_app:
        cols, rows = (int(n) for n in args.size.split("x"))
        result: dict[str, Any] = asyncio.run(_in_app(args.model, args.tokens, args.seed, (cols, rows)))
    else:
        result = race(args.model, args.tokens, args.rounds, args.size)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
