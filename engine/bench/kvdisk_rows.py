"""Reopening a long chat in a fresh engine: the first token when the history is read again, when
its KV cache comes back from disk (`engine.local.kvdisk`, restored in the warm-up that reopening
starts), and for a fresh short prompt: the issue's target is within 2x of that last one."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from engine.core.api import GenerateRequest, Message, SamplingParams, TurnFinished
from engine.bench.report import Section
from engine.local.client import Engine

PARAMS = SamplingParams(temperature=0.0, max_tokens=2, candidates=10)


async def _ttft(folder: str, kv: str, messages: list[Message], prepare: bool) -> TurnFinished:
    engine = Engine(kv_cache_dir=kv)
    try:
        await engine.load(folder)
        if prepare:  # reopening a chat warms its history while the user reads
            await engine.prepare(messages[:-1])
        async for event in engine.generate(GenerateRequest(tuple(messages), PARAMS)):
            if isinstance(event, TurnFinished):
                return event
        raise RuntimeError("no TurnFinished")
    finally:
        await engine.close()


async def _written(kv: Path) -> None:
    for _ in range(200):
        if list(kv.glob("*/*.ids.json")):
            return
        await asyncio.sleep(0.05)


async def kvdisk_rows(section: Section, name: str, folder: str, history_tokens: int, rounds: int) -> None:
    """`history_tokens` roughly (a word "w123" is about five of the bench tokenizer's tokens)."""
    history_words = max(20, history_tokens // 5)
    with tempfile.TemporaryDirectory() as tmp:
        kv = Path(tmp) / "kv"
        first = [Message("user", " ".join(f"w{i}" for i in range(history_words)))]
        done = await _ttft(folder, str(kv), first, prepare=False)
        await _written(kv)
        history = [*first, Message("assistant", done.text, done.token_ids)]
        follow = [*history, Message("user", "and then?")]
        cold, disk, short = [], [], []
        for _ in range(rounds):
            cold.append((await _ttft(folder, "", follow, prepare=False)).ttft_s * 1e3)
            disk.append((await _ttft(folder, str(kv), follow, prepare=True)).ttft_s * 1e3)
            short.append((await _ttft(folder, "", [Message("user", "hi there")], prepare=False)).ttft_s * 1e3)
    tokens = done.prompt_tokens + done.generated_tokens
    section.add(f"reopen a {tokens:,}-token chat ({name}): first token, history read again", cold, "ms")
    section.add(f"reopen a {tokens:,}-token chat ({name}): first token, KV cache from disk", disk, "ms")
    section.add(f"a fresh short prompt ({name}): first token", short, "ms")
    section.compare(f"reopened from disk / fresh short prompt ({name})", disk, short, target=2.0, at_most=True)
    section.compare(f"history read again / from disk ({name})", cold, disk)


