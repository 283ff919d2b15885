"""Issue #29 items 4 and 8: a --server URL httpx cannot use is one line naming it; a server that
ignores max_tokens or keeps a turn alive with SSE comments cannot keep a turn going forever."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_helpers import turn
from remote_server import ScriptedServer, chunk, reply

from engine.core.api import EngineError, GenerateRequest, Message, SamplingParams
from engine.remote import HttpOptions, RemoteEngine
from engine.remote.http import normalise_url
from tui.headless.run import main as run_main
from tui.main import main as tui_main

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    yield scripted
    scripted.stop()


# --- 4. URLs httpx cannot parse -------------------------------------------------------------------

BAD_URLS = ["http://127.0.0.1:99999", "http://[::1", "http://host\x1b]0;T\x07:80", "http://" + "a" * 10_000,
            "javascript:alert(1)", "http://exa mple.com", "http://:80", "http://" + "b" * 300 + ".com"]


@pytest.mark.parametrize("url", BAD_URLS, ids=range(len(BAD_URLS)))
def test_a_url_httpx_cannot_use_is_one_line_naming_it(url: str) -> None:
    with pytest.raises(EngineError) as caught:
        normalise_url(url)
    message = str(caught.value)
    assert "\n" not in message and "\x1b" not in message and len(message) < 400
    assert message.startswith("--server ")


@pytest.mark.parametrize("url", BAD_URLS[:4], ids=range(4))
def test_run_and_the_tui_say_one_line_for_a_bad_url(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["run", "--no-config", "--server", url, "--prompt", "hi"]) != 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("logitscope: --server ") and "Traceback" not in err[0]
    assert tui_main(["--server", url]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("logitscope: --server ") and "ExceptionGroup" not in err[0]


def test_good_urls_still_pass() -> None:
    assert normalise_url("127.0.0.1:8080/v1/") == "http://127.0.0.1:8080"
    assert normalise_url("https://[::1]:8443") == "https://[::1]:8443"
    assert normalise_url("http://gpu-box.local:8000") == "http://gpu-box.local:8000"


# --- 8. max_tokens and a total deadline ----------------------------------------------------------

def _request(max_tokens: int) -> GenerateRequest:
    return GenerateRequest((Message("user", "hi"),), SamplingParams(temperature=0.0, candidates=2, max_tokens=max_tokens))


async def test_a_server_that_ignores_max_tokens_is_cut_there(server: ScriptedServer) -> None:
    server.reset().chunks = reply([f"t{n}" for n in range(40)])
    engine = RemoteEngine(HttpOptions(server.url, timeout_s=5.0))
    await engine.load("scripted")
    try:
        tokens, done = await turn(engine, _request(5))
        assert len(tokens) == 5 and done.generated_tokens == 5 and done.finish_reason == "length"
        assert done.text == "t0t1t2t3t4"
    finally:
        await engine.close()


async def test_keep_alive_comments_do_not_outlast_the_turn_deadline(server: ScriptedServer) -> None:
    script = server.reset()
    script.chunks = [chunk("a", 5, -0.1, [("a", 5, -0.1)])]  # one token, then comments forever
    script.keepalive_s = 0.1
    engine = RemoteEngine(HttpOptions(server.url, timeout_s=0.5, turn_timeout_s=1.5))
    await engine.load("scripted")
    started = time.monotonic()
    try:
        with pytest.raises(EngineError, match=r"did not finish the reply within 1\.5 s .*turn_timeout_s"):
            await turn(engine, _request(50))
        assert time.monotonic() - started < 5.0
    finally:
        script.keepalive_s = None
        await engine.close()


def test_run_takes_turn_timeout_as_a_flag(server: ScriptedServer, capsys: pytest.CaptureFixture[str]) -> None:
    script = server.reset()
    script.chunks = [chunk("a", 5, -0.1, [("a", 5, -0.1)])]
    script.keepalive_s = 0.1
    try:
        started = time.monotonic()
        code = run_main(["run", "--no-config", "--server", server.url, "--model", "scripted",
                         "--turn-timeout", "1", "--prompt", "hi"])
        assert code == 1 and time.monotonic() - started < 10
    finally:
        script.keepalive_s = None
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("logitscope: note:")]
    assert err[-1].startswith("logitscope: The server at") and "within 1 s" in err[-1]
    assert run_main(["run", "--no-config", "--server", server.url, "--turn-timeout", "0", "--prompt", "hi"]) == 2
