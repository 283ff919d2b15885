"""The conversation library at scale: 1,000 chats of 50 turns, built here in a scratch folder.

What a user waits on: opening the library screen (the newest chats listed), each key typed in
its filter (a full-text search over every message), reopening one chat whole, and the commit a
streaming reply makes every few seconds. The screen's own key -> rows time is measured by
`tui.bench.probe_library` in a subprocess on the same database (engine/ never imports Textual).
The target: open and filter within 100 ms of a key.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from engine.bench.report import Section, run_json_module
from engine.core.library import Library
from engine.core.library.blobs import encode_tokens
from tui.bench.chat_documents import _tokens, chat_document  # noqa: F401 - chat_document: the tests' too

CHATS, TURNS = 1000, 50
TARGET_MS = 100.0


def build_library(path: Path, chats: int = CHATS, turns: int = TURNS, reply_tokens: int = 4) -> float:
    """Fill a fresh library; returns the seconds it took (one commit per chat, as the app makes)."""
    rng = random.Random(0)
    library = Library(path, clock=iter(range(1, 10**9)).__next__)
    start = time.perf_counter()
    for _ in range(chats):
        library.save(chat_document(rng, turns, reply_tokens), model_spec="bench")
    library.close()
    return time.perf_counter() - start


def _ms(run: Any) -> float:
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1e3


def library_section(section: Section, scratch: Path, rounds: int) -> None:
    path = scratch / "library-bench.sqlite3"
    path.unlink(missing_ok=True)
    built = build_library(path, CHATS, TURNS)
    section.notes.append(f"built {CHATS:,} chats x {TURNS} turns (4 tokens x 10 candidates per reply) in {built:.1f} s, "
                         f"{path.stat().st_size / 2**20:.0f} MiB")
    queries = ["p", "pe", "pen", "peng", "pengu", "penguin", "penguin v", "penguin vol", "penguin volcano"]
    opens, keys, likes, loads, saves = [], [], [], [], []
    rng = random.Random(1)
    big = chat_document(rng, TURNS, 40)
    for _ in range(rounds):
        lib = Library(path)
        opens.append(_ms(lambda lib=lib: lib.entries("", 200)))
        keys += [_ms(lambda q=q, lib=lib: lib.entries(q, 200)) for q in queries]
        fts, lib.fts = lib.fts, False
        likes += [_ms(lambda q=q, lib=lib: lib.entries(q, 200)) for q in queries]
        lib.fts = fts
        newest = lib.entries("", 1)[0].id
        loads.append(_ms(lambda lib=lib, newest=newest: lib.load(newest)))
        saves.append(_ms(lambda lib=lib: lib.save(big, conversation_id="bench-big")))
        lib.close()
    section.add(f"open: the newest 200 of {CHATS:,} chats", opens, "ms")
    section.add("filter: one key typed (FTS5), per key", keys, "ms")
    section.add("filter without FTS5 (LIKE fallback), per key", likes, "ms")
    section.add(f"reopen one {TURNS}-turn chat (document + token blobs)", loads, "ms")
    section.add("commit a 50-turn chat with 40-token replies (a streaming save)", saves, "ms")
    section.compare("filter per key (FTS5) / 100 ms", keys, [TARGET_MS] * len(keys), target=1.0, at_most=True)
    _blob_row(section)
    _screen_rows(section, path, rounds)
    _long_chat_rows(section, rounds)


def _blob_row(section: Section) -> None:
    tokens = _tokens(random.Random(2), 2000)
    size = len(encode_tokens(tokens))
    section.add("2,000-token reply, 10 candidates: blob bytes per token", [size / 2000], "B")
    section.notes.append(f"that reply's blob: {size / 1000:.0f} KB (budget ~250 KB); synthetic ids with a long tail "
                         "and float32 numbers, real stories260k replies measured 102 B/token")


def _screen_rows(section: Section, path: Path, rounds: int) -> None:
    from tui.bench import probe_library

    runs = [run_json_module(probe_library, "--library", str(path), timeout_s=120.0) for _ in range(rounds)]
    section.add("screen: Ctrl+G -> the list painted", [r["open_ms"] for r in runs], "ms")
    section.add("screen: key -> filtered rows painted (median)", [r["key_ms_median"] for r in runs], "ms")
    section.add("screen: key -> filtered rows painted (worst)", [r["key_ms_max"] for r in runs], "ms")
    section.compare("screen open / 100 ms", [r["open_ms"] for r in runs], [TARGET_MS] * len(runs), target=1.0,
                    at_most=True)
    section.compare("screen key (worst) / 100 ms", [r["key_ms_max"] for r in runs], [TARGET_MS] * len(runs),
                    target=1.0, at_most=True)


def _long_chat_rows(section: Section, rounds: int) -> None:
    """A 2,000-message chat opened from the library and the app quit (#29, item 19: under 1 s)."""
    from tui.bench import probe_long_chat

    runs = [run_json_module(probe_long_chat, timeout_s=180.0) for _ in range(rounds)]
    section.add("screen: Enter on a 2,000-message chat -> its newest messages painted",
                [r["open_painted_s"] for r in runs], "s")
    section.add("screen: ... -> the app idle again", [r["open_settled_s"] for r in runs], "s")
    section.add("... CPU seconds from Enter to idle (all threads)", [r["open_cpu_s"] for r in runs], "s")
    section.add("quit with that chat open", [r["quit_s"] for r in runs], "s")
    section.compare("long chat open (painted) / 1 s", [r["open_painted_s"] for r in runs], [1.0] * len(runs),
                    target=1.0, at_most=True)
