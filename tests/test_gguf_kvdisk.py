"""Recent histories' KV caches on disk for GGUF models (`engine.gguf.kvdisk`, issue #28.6): a new GGUF
engine starts from the history llama.cpp wrote, gets exactly the reply a cold engine computes, and
never uses an entry of another file or a damaged one. Skipped without llama-cpp-python."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import time
from pathlib import Path

import pytest
from engine_helpers import GREEDY, reply, run
from tinymodels import build_model

from engine.core.api import Message
from engine.local.client import Engine

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None
pytestmark = pytest.mark.skipif(not HAVE_LLAMA, reason='llama-cpp-python is not installed (pip install "logitscope[gguf]")')
HISTORY = "The library keeps every chat as it happens, with every token. " * 8
OPENING = [Message("system", HISTORY), Message("user", "What does it keep?")]


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from engine.gguf.convert import convert_folder

    root = tmp_path_factory.mktemp("gguf-kv")
    return convert_folder(build_model(root / "chatml", "chatml", seed=5), root / "chatml-f32.gguf")


def engine(kv: Path | None = None) -> Engine:
    from engine.gguf import GgufLoader

    return Engine(kv_cache_dir=str(kv) if kv else "", loaders=(GgufLoader(1),), warm_on_load=False)  # cold: counts hold


async def stored(folder: Path) -> None:
    end = time.monotonic() + 20
    while not list(folder.glob("*/*.ids.json")) and time.monotonic() < end:
        await asyncio.sleep(0.05)
    assert list(folder.glob("*/*.llamastate")), "nothing was written"


async def follow_up(gguf_file: Path, kv: Path) -> list[Message]:
    """One turn on an engine with the disk cache; the next turn's messages."""
    first = engine(kv)
    try:
        await first.load(str(gguf_file))
        _, done = await run(first, OPENING, GREEDY)
        await stored(kv)
    finally:
        await first.close()
    return [*OPENING, reply(done), Message("user", "And then?")]


async def turn(eng: Engine, gguf_file: Path, messages: list[Message]) -> tuple[list[int], list[float], int]:
    try:
        await eng.load(str(gguf_file))
        events, done = await run(eng, messages, GREEDY)
    finally:
        await eng.close()
    return [e.id for e in events], [e.logprob for e in events], done.reused_tokens


async def test_a_new_engine_starts_from_the_history_on_disk(gguf_file: Path, tmp_path: Path) -> None:
    kv = tmp_path / "kv"
    messages = await follow_up(gguf_file, kv)
    warm_ids, warm_logprobs, reused = await turn(engine(kv), gguf_file, messages)
    cold_ids, cold_logprobs, cold_reused = await turn(engine(), gguf_file, messages)
    assert cold_reused == 0 and reused >= 256  # the history came from disk, not from a prefill
    assert warm_ids == cold_ids  # and it is the same history: the same reply, token for token
    assert max(abs(a - b) for a, b in zip(warm_logprobs, cold_logprobs)) < 1e-4


async def test_another_file_or_a_damaged_entry_is_never_used(gguf_file: Path, tmp_path: Path) -> None:
    kv = tmp_path / "kv"
    messages = await follow_up(gguf_file, kv)
    cold_ids, _, _ = await turn(engine(), gguf_file, messages)
    stat = gguf_file.stat()
    os.utime(gguf_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # "another" file now
    try:
        ids, _, reused = await turn(engine(kv), gguf_file, messages)
    finally:
        os.utime(gguf_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert reused == 0 and ids == cold_ids
    for state in kv.glob("*/*.llamastate"):  # the same file again, but its state cut short
        state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    ids, _, reused = await turn(engine(kv), gguf_file, messages)
    assert reused == 0 and ids == cold_ids


async def test_eviction_removes_llama_state_files_too(gguf_file: Path, tmp_path: Path) -> None:
    """The size cap counts and removes a GGUF entry's state file, not only its ids."""
    from engine.local.kvdisk import DiskKVCache

    kv = tmp_path / "kv"
    await follow_up(gguf_file, kv)
    DiskKVCache(kv, "another-model", cap_bytes=0)._evict()
    assert not list(kv.glob("*/*.llamastate")) and not list(kv.glob("*/*.ids.json"))
