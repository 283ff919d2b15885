"""What a server reports about a turn is checked like any other outside data (issue #29, item 21):
negative, boolean, fractional or absurdly large usage counts, context sizes and token ids are
"unknown", never numbers that reach the stats, `--json` or the library."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from remote_server import ScriptedServer, reply

from engine.remote.capabilities import _llama_context
from engine.remote.wire import records, usage_counts
from tui.headless.run import main as run_main


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    yield scripted
    scripted.stop()


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": -5},
    {"prompt_tokens": True},
    {"prompt_tokens": 10**30},
    {"prompt_tokens": 3.5},
])
def test_an_impossible_prompt_count_is_unknown(usage: dict[str, Any]) -> None:
    assert usage_counts({"usage": usage}) is None


@pytest.mark.parametrize("timings", [{"cache_n": -4, "prompt_n": 2}, {"cache_n": 4, "prompt_n": -9},
                                     {"cache_n": False, "prompt_n": 2}, {"cache_n": 0, "prompt_n": 10**30}])
def test_impossible_llama_cpp_timings_are_unknown(timings: dict[str, Any]) -> None:
    assert usage_counts({"timings": timings}) is None


@pytest.mark.parametrize("cached", [-3, True, 10**30, "9"])
def test_an_impossible_cached_count_is_none_cached(cached: Any) -> None:
    assert usage_counts({"usage": {"prompt_tokens": 12, "prompt_tokens_details": {"cached_tokens": cached}}}) == (12, 0)


def test_sound_counts_pass() -> None:
    assert usage_counts({"usage": {"prompt_tokens": 12, "prompt_tokens_details": {"cached_tokens": 9}}}) == (12, 9)
    assert usage_counts({"timings": {"cache_n": 4, "prompt_n": 2}}) == (6, 4)


@pytest.mark.parametrize("n_ctx", [-1, True, 10**30, 2.5])
def test_an_impossible_context_size_is_unknown(n_ctx: Any) -> None:
    assert _llama_context({"default_generation_settings": {"n_ctx": n_ctx}}) == 0


def test_a_token_id_too_large_for_any_vocabulary_is_unknown() -> None:
    entry = {"id": 10**30, "token": "a", "logprob": -0.5, "top_logprobs": [{"id": 2**40, "token": "a", "logprob": -0.5}]}
    [record] = records({"logprobs": {"content": [entry]}})
    assert record.id is None and record.top[0].id is None


def test_negative_usage_never_reaches_json(server: ScriptedServer, capsys: pytest.CaptureFixture[str]) -> None:
    script = server.reset()
    script.chunks = reply(["Hello", " there"])
    script.chunks[-1]["usage"] = {"prompt_tokens": -7, "prompt_tokens_details": {"cached_tokens": -9}}
    assert run_main(["run", "--server", server.url, "--model", "scripted", "--prompt", "hi", "--json"]) == 0
    turn = next(json.loads(line) for line in capsys.readouterr().out.splitlines() if '"type": "turn"' in line)
    assert min(turn["prompt_tokens"], turn["reused_tokens"], turn["prefilled_tokens"]) >= 0, turn
    assert turn["prefill_tps"] >= 0
