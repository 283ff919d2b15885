"""The remote engine against a real `mlx_lm.server` on loopback, serving a tiny model the tests
build: a multi-turn chat with candidates equal to the local engine's (same model, same prompt ids,
logprobs within 1e-3), the server's prefix cache reported as reused, cancel, a server killed
mid-reply. One server per module (a start costs seconds)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine_helpers import turn
from engine.core.api import (
    EngineError,
    GenerateRequest,
    Message,
    SamplingParams,
    TurnFinished,
)
from engine.local.client import Engine
from engine.remote import HttpOptions, RemoteEngine

pytestmark = pytest.mark.slow
GREEDY = SamplingParams(temperature=0.0, candidates=8, max_tokens=6, repetition_penalty=1.0, min_p=0.0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(model: Path, *, launcher: tuple[str, ...] = ()) -> tuple[subprocess.Popen[bytes], str]:
    """mlx_lm.server on 127.0.0.1 (under `launcher`, e.g. mlx.launch), waited for until /health
    answers (at most 60 s). Its own session, so `stop_server` ends every rank."""
    port = _free_port()
    command = [*launcher, sys.executable, "-m", "mlx_lm.server", "--model", str(model), "--host", "127.0.0.1",
               "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return process, url
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"mlx_lm.server exited with {process.returncode}") from None
            time.sleep(0.2)
    stop_server(process)
    raise RuntimeError("mlx_lm.server did not start within 60 s")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    """Kill the server's whole process group (every rank under mlx.launch)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@pytest.fixture(scope="module")
def served(chatml_model: Path) -> Iterator[str]:
    process, url = start_server(chatml_model)
    yield url
    stop_server(process)




async def test_a_chat_through_mlx_lm_server_matches_the_local_engine(served: str, chatml_model: Path) -> None:
    remote = RemoteEngine(HttpOptions(served))
    info = await remote.load("demo")
    assert info.blas == "mlx_lm.server"
    first = GenerateRequest((Message("user", "hello"),), GREEDY)
    # penalties too: raw means after them, over our window of 64 (sent as mlx_lm.server's
    # *_context_size; its own 20 gave logprobs 0.02 off on this prompt of over 20 tokens)
    penalised = GenerateRequest((Message("user", "the cat sat on the mat and the dog ran far away and then " * 3),),
                                GREEDY.with_changes(repetition_penalty=1.3, presence_penalty=0.5, max_tokens=12))
    remote_tokens, remote_done = await turn(remote, first)
    remote_penalised, _ = await turn(remote, penalised)
    local = Engine()
    try:
        await local.load(str(chatml_model))
        local_tokens, _ = await turn(local, first)
        local_penalised, _ = await turn(local, penalised)
    finally:
        await local.close()
    for mine, served_ in ((local_tokens, remote_tokens), (local_penalised, remote_penalised)):
        assert [t.id for t in served_] == [t.id for t in mine]  # greedy: the same reply
        for ours, theirs in zip(mine, served_):
            assert theirs.rank == 1 and abs(theirs.logprob - ours.logprob) < 1e-3
            assert [c.id for c in theirs.candidates] == [c.id for c in ours.candidates]
            assert max(abs(a.logprob - b.logprob) for a, b in zip(ours.candidates, theirs.candidates)) < 1e-3
            assert theirs.entropy is None and theirs.sampled_prob is None
    second = GenerateRequest((*first.messages, Message("assistant", remote_done.text, remote_done.token_ids),
                              Message("user", "and then?")), GREEDY)
    _, again = await turn(remote, second)
    assert again.reused_tokens > 0 and again.prompt_tokens > remote_done.prompt_tokens  # its prefix cache
    branch = (*first.messages, Message("assistant", "", (remote_tokens[0].candidates[1].id,)))
    with pytest.raises(EngineError, match="cannot continue a partial reply"):  # no token-id prompts
        await turn(remote, GenerateRequest(branch, GREEDY, continue_last=True))
    await remote.close()


async def test_sampling_gives_the_chosen_tokens_exactly_but_no_candidates(served: str, chatml_model: Path) -> None:
    """mlx_lm.server mislabels the chosen token once top_logprobs are asked for (see README):
    at temperature > 0 only the exact chosen ids and logprobs are asked for; their texts come
    from the tokenizer given with --tokenizer (the server sends bare ids)."""
    remote = RemoteEngine(HttpOptions(served), tokenizer=str(chatml_model))
    await remote.load("demo")
    tokens, done = await turn(remote, GenerateRequest((Message("user", "hi"),),
                                                       GREEDY.with_changes(temperature=1.0, seed=3, max_tokens=12)))
    assert tokens and all(t.candidates == () and t.rank is None and t.logprob <= 0 for t in tokens)
    assert done.token_ids == tuple(t.id for t in tokens)
    assert "".join(t.text for t in tokens) == done.text
    await remote.close()


async def test_cancel_ends_a_long_reply_at_once(served: str) -> None:
    remote = RemoteEngine(HttpOptions(served))
    await remote.load("demo")
    # long enough to be cut (seconds), short enough that the server stops soon after the hang-up
    events = remote.generate(GenerateRequest((Message("user", "go on"),), GREEDY.with_changes(max_tokens=5000)))
    asyncio.get_running_loop().call_later(0.3, remote.cancel)
    started = time.monotonic()
    done = [event async for event in events][-1]
    assert isinstance(done, TurnFinished) and done.finish_reason == "cancelled"
    assert time.monotonic() - started < 2.0
    await remote.close()


async def test_a_server_killed_mid_reply_is_one_line(chatml_model: Path) -> None:
    process, url = start_server(chatml_model)
    remote = RemoteEngine(HttpOptions(url))
    try:
        await remote.load("demo")
        asyncio.get_running_loop().call_later(0.5, stop_server, process)
        with pytest.raises(EngineError, match="^The server at http://127.0.0.1:\\d+ (cut the connection|failed)"):
            await turn(remote, GenerateRequest((Message("user", "go on"),), GREEDY.with_changes(max_tokens=5000)))
        with pytest.raises(EngineError, match="Cannot reach the server"):
            await turn(remote, GenerateRequest((Message("user", "again"),), GREEDY))
    finally:
        stop_server(process)
        await remote.close()


@pytest.mark.skipif(shutil.which("mlx.launch") is None, reason="mlx.launch is not installed")
async def test_one_turn_through_mlx_lm_server_sharded_over_two_processes(chatml_model: Path, served: str) -> None:
    """`mlx.launch -n 2 --backend ring` on localhost: tensor-parallel, as across two machines. The
    reply and its numbers equal the one-process server's (float32 sums in another order: 1e-4)."""
    ring = ("mlx.launch", "-n", "2", "--backend", "ring", "--starting-port", str(_free_port()), "--")
    process, url = start_server(chatml_model, launcher=ring)
    request = GenerateRequest((Message("user", "hello"),), GREEDY)
    sharded, single = RemoteEngine(HttpOptions(url)), RemoteEngine(HttpOptions(served))
    try:
        await sharded.load("demo")
        await single.load("demo")
        (theirs, done), (ours, _) = await turn(sharded, request), await turn(single, request)
    finally:
        stop_server(process)
        await sharded.close()
        await single.close()
    assert done.finish_reason in ("stop", "length") and [t.id for t in theirs] == [t.id for t in ours]
    assert max(abs(a.logprob - b.logprob) for a, b in zip(theirs, ours)) < 1e-4
