"""The TUI's numbers, measured by ``python -m tui.bench.probe_app`` in a subprocess.

engine/ never imports Textual, so the probe lives with the TUI and this side only runs it and
reads its JSON: stream throughput with a scripted firehose engine, key-to-screen latency while
a reply streams, start-up (command -> first painted screen -> loaded model), and the real engine
inside the app (first token and decode speed while the app draws).
"""

from __future__ import annotations

import time
from typing import Any

from engine.bench.report import Section, run_json_module

def _probe(*args: str) -> dict[str, Any]:
    from tui.bench import probe_app  # imported here: the bench process itself never draws

    return run_json_module(probe_app, *args, timeout_s=300.0)


def tui_section(section: Section, rounds: int, tokens: int, app_model: tuple[str, str] | None = None) -> None:
    """Rows for throughput, backlog, key latency and start-up, and with `app_model` (name, folder)
    the real engine inside the app."""
    streams = [_probe("stream", "--tokens", str(tokens)) for _ in range(rounds)]
    section.add(f"screen keeps up with (scripted engine, {tokens} tokens)", [s["stream_tps"] for s in streams], "tok/s")
    section.add("backlog after the engine finished", [s["backlog_s"] * 1e3 for s in streams], "ms")
    section.add("key -> screen while streaming 500 tok/s (median)", [s["key_ms_median"] for s in streams], "ms")
    section.add("key -> screen while streaming 500 tok/s (worst)", [s["key_ms_max"] for s in streams], "ms")
    for label, extra in (("scripted engine", ()), ("real engine, demo model", ("--real",))):
        starts = [_probe("startup", "--since", repr(time.time()), *extra) for _ in range(rounds)]
        section.add(f"command -> first painted screen ({label})", [s["first_paint_s"] for s in starts], "s")
        section.add(f"command -> model loaded ({label})", [s["model_loaded_s"] for s in starts], "s")
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
    section.notes.append("targets: >= 2,000 tok/s with no growing backlog; key -> screen < 50 ms; first paint < 1 s")
