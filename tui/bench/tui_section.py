"""The TUI's numbers, measured by ``python -m tui.bench.probe_app`` in a subprocess.

engine/ never imports Textual, so the probe lives with the TUI and this side only runs it and
reads its JSON: stream throughput with a scripted firehose engine, key-to-screen latency while
a reply streams, start-up (command -> first painted screen -> loaded model, raced against mlx_lm.chat on the same
model in alternating rounds), and the real engine
inside the app (first token and decode speed while the app draws).
"""

from __future__ import annotations

import time
from typing import Any

from engine.bench.report import Section, run_json_module

def _probe(*args: str) -> dict[str, Any]:
    from tui.bench import probe_app  # imported here: the bench process itself never draws

    return run_json_module(probe_app, *args, timeout_s=300.0)


def _startup(*extra: str) -> dict[str, Any]:
    """One start of the app as the console script starts it (`tui.bench.probe_startup`)."""
    from tui.bench import probe_startup

    return run_json_module(probe_startup, "--since", repr(time.time()), *extra, timeout_s=300.0)


def _race_round() -> dict[str, float]:
    """logitscope and mlx_lm.chat on the same model, one after the other: a round of the race
    (alternating, so a machine that gets busier or quieter weighs on both alike)."""
    from engine.models.hub import demo_model_path
    from tui.bench.chat_race import mlx_chat_ready_s

    ours = _startup("--real")
    return {**ours, "mlx_chat_s": mlx_chat_ready_s(str(demo_model_path()))}


def tui_section(section: Section, rounds: int, tokens: int, app_model: tuple[str, str] | None = None) -> None:
    """Rows for throughput, backlog, key latency and start-up, and with `app_model` (name, folder)
    the real engine inside the app."""
    streams = [_probe("stream", "--tokens", str(tokens)) for _ in range(rounds)]
    section.add(f"screen keeps up with (scripted engine, {tokens} tokens)", [s["stream_tps"] for s in streams], "tok/s")
    section.add("backlog after the engine finished", [s["backlog_s"] * 1e3 for s in streams], "ms")
    section.add("key -> screen while streaming 500 tok/s (median)", [s["key_ms_median"] for s in streams], "ms")
    section.add("key -> screen while streaming 500 tok/s (worst)", [s["key_ms_max"] for s in streams], "ms")
    starts = [_startup() for _ in range(rounds)]
    section.add("command -> first painted screen (scripted engine)", [s["first_paint_s"] for s in starts], "s")
    race = [_race_round() for _ in range(max(rounds, 3))]
    section.add("command -> first painted screen (real engine, demo model)", [r["first_paint_s"] for r in race], "s")
    section.add("command -> ready: logitscope (demo model)", [r["model_loaded_s"] for r in race], "s")
    section.add("command -> ready: mlx_lm.chat (same model, same rounds)", [r["mlx_chat_s"] for r in race], "s")
    section.add("ready: logitscope minus mlx_lm.chat (per round)", [r["model_loaded_s"] - r["mlx_chat_s"] for r in race],
                "s")
    if app_model is not None:
        name, folder = app_model
        runs = [_probe("app", "--model", folder, "--turns", "6", "--tokens", "200") for _ in range(rounds)]
        section.add(f"in the app: Enter -> first token, real engine ({name})", [r["first_token_ms"] for r in runs], "ms")
        section.add(f"in the app: the engine's own TTFT, same turns ({name})", [r["engine_ttft_ms"] for r in runs], "ms")
        section.add(f"in the app: decode while it draws, 10 candidates ({name})", [r["decode_tps"] for r in runs],
                    "tok/s")
        previews = [_probe("previews", "--model", folder, "--presses", "10") for _ in range(rounds)]
        section.add(f"key -> screen while 3 previews compute (median, {name})", [p["key_ms_median"] for p in previews],
                    "ms")
        section.add(f"key -> screen while 3 previews compute (worst, {name})", [p["key_ms_max"] for p in previews], "ms")
        section.notes.append(f"{name} in the app: one-token turns typed with a pause, as a person sends them; compare "
                             "the decode row with the decode section's engine alone")
    section.notes.append("targets: >= 2,000 tok/s with no growing backlog; key -> screen < 50 ms; first paint < 1 s; "
                         "ready no later than mlx_lm.chat on the same model")
