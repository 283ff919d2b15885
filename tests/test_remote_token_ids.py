"""Token-id mode, against a scripted vLLM on loopback (``/v1/completions`` with ``prompt: [ids]``):
the prompt rendered here with the model's tokenizer, replies spliced as their exact ids so the
server's prefix cache reuses the history, a branch sent as prompt + reply prefix + chosen id, a
parameter changed mid-reply continuing from the ids received so far, and a missing tokenizer
falling back to the chat endpoint with one note."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from remote_server import ScriptedServer
from transformers import AutoTokenizer

from engine_helpers import turn
from engine.core.api import (
    GenerateRequest,
    Message,
    SamplingParams,
    TokenEvent,
    TurnFinished,
)
from engine.remote import HttpOptions, RemoteEngine

PARAMS = SamplingParams(temperature=0.0, candidates=5, max_tokens=50)
HELLO = (Message("user", "hello"),)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    yield scripted
    scripted.stop()


@pytest.fixture
async def remote(server: ScriptedServer, chatml_model: Path) -> AsyncIterator[RemoteEngine]:
    server.reset().vllm = True
    engine = RemoteEngine(HttpOptions(server.url, timeout_s=5.0), tokenizer=str(chatml_model))
    await engine.load("scripted")
    yield engine
    await engine.close()




async def test_the_history_goes_as_exact_ids_and_the_server_cache_is_reused(remote: RemoteEngine,
                                                                           server: ScriptedServer,
                                                                           chatml_model: Path) -> None:
    tokens, first = await turn(remote, GenerateRequest(HELLO, PARAMS))
    expected = AutoTokenizer.from_pretrained(str(chatml_model)).apply_chat_template(
        [{"role": "user", "content": "hello"}], add_generation_prompt=True, tokenize=False)
    assert list(first.prompt_ids) == AutoTokenizer.from_pretrained(str(chatml_model)).encode(
        expected, add_special_tokens=False)
    assert server.script.bodies[-1]["prompt"] == list(first.prompt_ids)
    assert [t.id for t in tokens] == [300, 301, 302, 303] and first.token_ids == (300, 301, 302, 303)
    assert tokens[0].rank == 1 and [c.id for c in tokens[0].candidates] == [300, 7]
    assert tokens[0].candidates[1].text != ""  # named by id only: its text from our tokenizer
    history = (*HELLO, Message("assistant", "whatever the text says", first.token_ids), Message("user", "more"))
    counted = await remote.count_tokens(history)
    _, second = await turn(remote, GenerateRequest(history, PARAMS))
    sent = server.script.bodies[-1]["prompt"]
    assert sent[: len(first.prompt_ids) + 4] == [*first.prompt_ids, 300, 301, 302, 303]  # the exact reply ids
    assert second.reused_tokens == len(first.prompt_ids) + 4 and counted == len(sent) == second.prompt_tokens


async def test_a_branch_sends_the_reply_prefix_and_the_chosen_id(remote: RemoteEngine, server: ScriptedServer) -> None:
    _, first = await turn(remote, GenerateRequest(HELLO, PARAMS))
    branch = (*HELLO, Message("assistant", "", (300, 301)))  # the first two tokens, the second one chosen
    tokens, done = await turn(remote, GenerateRequest(branch, PARAMS, continue_last=True))
    assert server.script.bodies[-1]["prompt"] == [*first.prompt_ids, 300, 301]
    assert [t.index for t in tokens] == [2, 3] and done.token_ids == (300, 301, 302, 303)


async def test_a_parameter_changed_mid_reply_continues_from_the_ids_so_far(remote: RemoteEngine,
                                                                          server: ScriptedServer) -> None:
    server.script.delay_s = 0.15
    events = remote.generate(GenerateRequest(HELLO, PARAMS))
    first = await events.__anext__()
    assert isinstance(first, TokenEvent)
    remote.set_params(PARAMS.with_changes(temperature=1.3))
    rest = [event async for event in events]
    done = rest[-1]
    assert isinstance(done, TurnFinished) and done.token_ids == (300, 301, 302, 303)
    assert [e.index for e in rest[:-1]] == [1, 2, 3]
    again = server.script.bodies[-1]
    assert again["temperature"] == 1.3 and again["prompt"] == [*done.prompt_ids, 300]
    assert again["max_tokens"] == PARAMS.max_tokens - 1


async def test_cancel_in_token_id_mode_closes_at_once(remote: RemoteEngine, server: ScriptedServer) -> None:
    server.script.delay_s = 0.5
    events = remote.generate(GenerateRequest(HELLO, PARAMS))
    await events.__anext__()
    remote.cancel()
    done = [event async for event in events][-1]
    assert isinstance(done, TurnFinished) and done.finish_reason == "cancelled" and done.token_ids == (300,)


async def test_without_a_tokenizer_the_chat_endpoint_is_used_and_said_once(server: ScriptedServer,
                                                                          tmp_path: Path) -> None:
    server.reset().vllm = True
    engine = RemoteEngine(HttpOptions(server.url), tokenizer=str(tmp_path / "nothing-here"))
    info = await engine.load("scripted")
    assert sum("takes token-id prompts, but No tokenizer" in note for note in info.notes) == 1
    await turn(engine, GenerateRequest(HELLO, PARAMS))
    assert "messages" in server.script.bodies[-1]
    await engine.close()
    await asyncio.sleep(0)


def test_run_with_server_and_tokenizer_sends_ids(server: ScriptedServer, chatml_model: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from tui.headless.run import main as run_main

    server.reset().vllm = True
    assert run_main(["run", "--server", server.url, "--tokenizer", str(chatml_model), "--prompt", "hi",
                     "--prompt", "again", "--json"]) == 0
    turns = [line for line in capsys.readouterr().out.splitlines() if '"type": "turn"' in line]
    assert len(turns) == 2 and '"prompt_ids": []' not in turns[1] and server.script.bodies[-1]["prompt"]


def test_a_chat_template_that_never_ends_fails_the_turn_and_never_holds_the_exit(monkeypatch: pytest.MonkeyPatch,
                                                                                 chatml_model: Path) -> None:
    """The template runs off the event loop with a deadline, in a thread that quitting does not
    wait for (asyncio.run joins its default executor's threads: a stuck one held the exit)."""
    import time

    from engine.core.api import EngineError
    from engine.remote import tokens as remote_tokens

    release = threading.Event()
    stuck = remote_tokens.load_tokenizer(str(chatml_model))
    monkeypatch.setattr(stuck._tokenizer, "apply_chat_template", lambda *a, **k: release.wait(30) and "")
    monkeypatch.setattr(remote_tokens, "RENDER_DEADLINE_S", 0.3)

    async def render() -> str:
        try:
            await stuck.render(HELLO, False)
        except EngineError as exc:
            return str(exc)
        return "rendered"

    started = time.monotonic()
    said = asyncio.run(render())
    assert time.monotonic() - started < 2.0 and "chat template ran for over" in said
    release.set()
