"""Recent histories' KV caches on disk (engine.local.kvdisk): a new engine (a reopened chat, another
process) starts from the stored cache, gets exactly the reply a cold engine computes, and never
uses an entry made for another model."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from engine_helpers import GREEDY, reply, run

from engine.core.api import Message
from engine.local.client import Engine

HISTORY = "The library keeps every chat as it happens, with every token. " * 8


async def _turn(engine: Engine, model: Path, messages: list[Message]) -> tuple[list[int], int]:
    await engine.load(str(model))
    events, done = await run(engine, messages, GREEDY)
    return [e.id for e in events], done.reused_tokens


async def _stored(folder: Path) -> None:
    end = time.monotonic() + 20
    while not list(folder.glob("*/*.ids.json")) and time.monotonic() < end:
        await asyncio.sleep(0.05)
    assert list(folder.glob("*/*.ids.json")), "nothing was written"


async def test_a_new_engine_starts_from_the_history_on_disk(chatml_model: Path, tmp_path: Path) -> None:
    kv = tmp_path / "kv"
    first = Engine(kv_cache_dir=str(kv))
    opening = [Message("system", HISTORY), Message("user", "What does it keep?")]
    try:
        await first.load(str(chatml_model))
        _, done = await run(first, opening, GREEDY)
        await _stored(kv)
    finally:
        await first.close()
    follow_up = [*opening, reply(done), Message("user", "And then?")]

    warm = Engine(kv_cache_dir=str(kv))
    cold = Engine(warm_on_load=False)  # nothing reused at all without the disk
    try:
        warm_ids, reused = await _turn(warm, chatml_model, follow_up)
        cold_ids, cold_reused = await _turn(cold, chatml_model, follow_up)
    finally:
        await warm.close()
        await cold.close()
    assert cold_reused == 0 and reused >= 256  # the history came from disk, not from a prefill
    assert warm_ids == cold_ids  # and it is the same history: the same reply, token for token


async def test_an_entry_for_another_model_is_never_used(chatml_model: Path, tmp_path: Path) -> None:
    kv = tmp_path / "kv"
    messages = [Message("system", HISTORY), Message("user", "hi")]
    first = Engine(kv_cache_dir=str(kv))
    try:
        await _turn(first, chatml_model, messages)
        await _stored(kv)
    finally:
        await first.close()
    config = chatml_model / "config.json"
    stat = config.stat()
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # "another" model now
    again = Engine(kv_cache_dir=str(kv), warm_on_load=False)
    try:
        _, reused = await _turn(again, chatml_model, messages)
    finally:
        await again.close()
        os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert reused == 0


async def test_warming_a_draft_writes_nothing_more(chatml_model: Path, tmp_path: Path) -> None:
    """One file per turn, not one per warm-up while a message is being typed."""
    kv = tmp_path / "kv"
    engine = Engine(kv_cache_dir=str(kv))
    messages = [Message("system", HISTORY), Message("user", "hi")]
    try:
        await _turn(engine, chatml_model, messages)
        await _stored(kv)
        for draft in ("a", "an", "and", "and t"):
            await engine.prepare([*messages, Message("assistant", "x")], draft)
        await asyncio.sleep(0.3)
    finally:
        await engine.close()
    assert len(list(kv.glob("*/*.ids.json"))) == 1
