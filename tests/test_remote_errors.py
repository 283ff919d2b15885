"""The remote engine against a scripted server on loopback: a stream read token by token with
what the server knows (and None for what it does not), cancel closing the connection at once,
and every failure (refused, 401/404/429/500, a model not served, a stream cut mid-reply, silence,
malformed or missing logprobs) one clear EngineError line, never a hang."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from remote_server import ScriptedServer, reply

from engine_helpers import turn
from engine.core.api import (
    EngineError,
    GenerateRequest,
    Message,
    ModelLoadError,
    SamplingParams,
    TokenEvent,
    TurnFinished,
)
from tui.headless.run import main as run_main
from engine.remote import HttpOptions, RemoteEngine, remote_engine
from engine.core.settings import load_config
from engine.core.settings.sections import EngineConfig
from tui.main import main as tui_main

HELLO = GenerateRequest((Message("user", "hi"),), SamplingParams(temperature=0.0, candidates=5))


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    yield scripted
    scripted.stop()


@pytest.fixture
async def remote(server: ScriptedServer) -> AsyncIterator[RemoteEngine]:
    server.reset()
    engine = RemoteEngine(HttpOptions(server.url, timeout_s=2.0))
    await engine.load("scripted")
    yield engine
    await engine.close()


async def _turn(engine: object, request: GenerateRequest = HELLO) -> tuple[list[TokenEvent], TurnFinished]:
    return await turn(engine, request)


async def test_a_streamed_turn_gives_tokens_candidates_and_the_cached_count(remote: RemoteEngine,
                                                                            server: ScriptedServer) -> None:
    tokens, done = await _turn(remote)
    assert [t.text for t in tokens] == ["Hello", " there"] and [t.id for t in tokens] == [100, 101]
    first = tokens[0]
    assert first.rank == 1 and first.logprob == -0.1 and [c.id for c in first.candidates] == [100, 1]
    assert first.sampled_prob is None and first.entropy is None and first.candidates[0].sampled_prob is None
    assert (done.prompt_tokens, done.reused_tokens, done.prefilled_tokens) == (12, 9, 3)
    assert done.text == "Hello there" and done.token_ids == (100, 101) and done.finish_reason == "stop"
    body = server.script.bodies[-1]
    assert body["stream"] and body["logprobs"] and body["top_logprobs"] == 5 and body["model"] == "scripted"


async def test_cancel_closes_the_stream_at_once(remote: RemoteEngine, server: ScriptedServer) -> None:
    server.script.chunks = reply([f"w{i}" for i in range(100)])
    server.script.delay_s = 0.5
    events = remote.generate(HELLO)
    first = await events.__anext__()
    assert isinstance(first, TokenEvent)
    started = time.monotonic()
    remote.cancel()
    rest = [event async for event in events]
    assert time.monotonic() - started < 0.35  # not after the next token (0.5 s away)
    assert isinstance(rest[-1], TurnFinished) and rest[-1].finish_reason == "cancelled"
    assert await asyncio.to_thread(server.script.closed_early.wait, 3.0)  # the server saw the hang-up


@pytest.mark.parametrize(("status", "says"), [
    (401, "refused the API key (401)"), (404, "no such endpoint or model (404)"),
    (429, "too many requests (429)"), (500, "failed with HTTP 500: scripted failure"),
])
async def test_an_http_error_is_one_line(remote: RemoteEngine, server: ScriptedServer, status: int, says: str) -> None:
    server.script.status = status
    with pytest.raises(EngineError, match="^The server at .*" + says.replace("(", r"\(").replace(")", r"\)")):
        await _turn(remote)


async def test_a_stream_cut_mid_reply_is_one_line_after_the_tokens_received(remote: RemoteEngine,
                                                                             server: ScriptedServer) -> None:
    server.script.chunks = reply(["a", "b", "c", "d"])
    server.script.cut_after = 2
    seen: list[TokenEvent] = []
    with pytest.raises(EngineError, match="cut the connection mid-reply"):
        async for event in remote.generate(HELLO):
            assert isinstance(event, TokenEvent)
            seen.append(event)
    assert [t.text for t in seen] == ["a", "b"]


async def test_a_silent_server_times_out(server: ScriptedServer) -> None:
    server.reset().silent_s = 1.5
    engine = RemoteEngine(HttpOptions(server.url, timeout_s=0.5))
    await engine.load("scripted")
    started = time.monotonic()
    with pytest.raises(EngineError, match="went silent"):
        await _turn(engine)
    assert time.monotonic() - started < 1.4
    await engine.close()


@pytest.mark.parametrize(("chunks", "says"), [
    ([{"choices": [{"delta": {"content": "x"}}]}], "without its logprobs"),
    ([{"choices": [{"delta": {"content": "x"}, "logprobs": {"content": [{"token": "x", "logprob": "?"}]}}]}],
     "impossible logprob"),
    (["{not json"], "not JSON"),
    ([{"choices": ["x"]}], "malformed choice"),
])
async def test_malformed_or_missing_logprobs_are_one_line(remote: RemoteEngine, server: ScriptedServer,
                                                          chunks: list[Any], says: str) -> None:
    server.script.chunks = chunks
    with pytest.raises(EngineError, match=says):
        await _turn(remote)


async def test_a_model_the_server_does_not_serve_is_refused_at_load(server: ScriptedServer) -> None:
    server.reset()
    engine = RemoteEngine(HttpOptions(server.url))
    with pytest.raises(ModelLoadError, match="does not serve 'other' .it serves: scripted"):
        await engine.load("other")
    assert (await engine.load("demo")).name == "scripted"  # "demo" = what the server serves
    await engine.close()


async def test_a_refused_key_at_load_is_one_line(server: ScriptedServer) -> None:
    server.reset().models_status = 401
    with pytest.raises(ModelLoadError, match=r"refused the API key \(401\)"):
        await RemoteEngine(HttpOptions(server.url)).load("scripted")


async def test_nothing_listening_is_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = RemoteEngine(HttpOptions(f"127.0.0.1:{port}"))
    with pytest.raises(ModelLoadError, match="Cannot reach the server at http://127.0.0.1:.* .is it running"):
        await engine.load("x")
    await engine.close()


async def test_a_partial_reply_cannot_be_continued_over_the_chat_endpoint(remote: RemoteEngine) -> None:
    branch = GenerateRequest((Message("user", "hi"), Message("assistant", "He", (100,))), continue_last=True)
    with pytest.raises(EngineError, match="cannot continue a partial reply"):
        await _turn(remote, branch)


def test_run_with_server_prints_unknown_numbers_as_null(server: ScriptedServer,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    server.reset()
    assert run_main(["run", "--server", server.url, "--model", "scripted", "--prompt", "hi", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"sampled_prob": null' in out and '"entropy": null' in out and '"reused_tokens": 9' in out


def test_run_against_a_failing_server_is_one_line(server: ScriptedServer, capsys: pytest.CaptureFixture[str]) -> None:
    server.reset().status = 500
    assert run_main(["run", "--server", server.url, "--prompt", "hi"]) == 1
    problems = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("logitscope: note:")]
    assert len(problems) == 1 and "HTTP 500" in problems[0] and "Traceback" not in problems[0]


def test_the_engine_table_and_a_bad_url_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[engine]\nserver = "ftp://nowhere"\ntimeout_s = -3\n', encoding="utf-8")
    loaded = load_config(config, explicit=True)
    assert loaded.config.engine.timeout_s == 60.0 and any("timeout_s" in p for p in loaded.problems)
    assert run_main(["run", "--config", str(config), "--prompt", "hi"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == ("logitscope: --server must be an http:// or https:// URL, "
                                                        "not 'ftp://nowhere'")
    assert tui_main(["--server", "ftp://nowhere"]) == 2


def test_the_api_key_comes_from_the_named_variable(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVER_KEY", "s3cret")
    engine = remote_engine(EngineConfig(server=server.url, api_key_env="MY_SERVER_KEY"))
    assert engine._options.api_key == "s3cret"
    assert remote_engine(EngineConfig(server=server.url, api_key_env=""))._options.api_key == ""
