"""The remote engine's pure parts: SSE lines, every server's logprobs dialect, request bodies,
URLs. Each malformed input is one EngineError line, never a KeyError or a traceback."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator

import pytest

from engine.core.api import EngineError, SamplingParams
from engine.remote.events import piece_text, token_event
from engine.remote.http import normalise_url, status_problem
from engine.remote.sse import data_objects, lines_of, parse_data_line
from engine.remote.wire import (
    Alternative,
    TokenRecord,
    greedy_choice,
    records,
    sampling_fields,
    usage_counts,
)


def test_sse_lines_give_objects_and_skip_comments_and_done() -> None:
    assert parse_data_line('data: {"a": 1}\n') == {"a": 1}
    assert parse_data_line(": keepalive 1/3") is None
    assert parse_data_line("data: [DONE]") is None
    assert parse_data_line("") is None
    with pytest.raises(EngineError, match="not JSON"):
        parse_data_line("data: {oops")
    with pytest.raises(EngineError, match="not a JSON object"):
        parse_data_line("data: [1, 2]")


async def test_endless_bytes_without_a_newline_fail_before_filling_the_memory() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'data: {"a": 1}\n\ndata: '
        while True:
            yield b"x" * 65536

    seen = []
    with pytest.raises(EngineError, match="MiB: not a token event"):
        async for item in data_objects(lines_of(chunks())):
            seen.append(item)
    assert seen == [{"a": 1}]


def test_chat_logprobs_with_ids_are_sorted_best_first() -> None:
    """mlx_lm.server sends its top-N unordered (an argpartition) and llama.cpp adds ids."""
    choice = {"logprobs": {"content": [{"id": 5, "token": "a", "logprob": -2.0, "top_logprobs": [
        {"id": 5, "token": "a", "logprob": -2.0}, {"id": 6, "token": "b", "logprob": -0.5}]}]}}
    [record] = records(choice)
    assert record.id == 5 and [a.id for a in record.top] == [6, 5]
    assert greedy_choice(record).id == 6  # at temperature 0 the chosen token is the best


def test_vllm_token_ids_and_bytes_are_read() -> None:
    choice = {"logprobs": {"content": [{"token": "token_id:42", "logprob": -0.1, "top_logprobs": []},
                                       {"token": "?", "bytes": [0xC3, 0xA9], "logprob": -0.2}]}}
    first, second = records(choice)
    assert (first.id, first.token) == (42, "")
    assert (second.id, second.token) == (None, "é")


def test_legacy_completion_logprobs_are_read() -> None:
    choice = {"logprobs": {"tokens": [" a"], "token_logprobs": [-0.3], "top_logprobs": [{" a": -0.3, " b": -1.0}]}}
    [record] = records(choice)
    assert record.logprob == -0.3 and [a.token for a in record.top] == [" a", " b"]


@pytest.mark.parametrize("logprobs", [
    "nonsense", {"content": ["x"]}, {"content": [{"token": "a", "logprob": "high"}]},
    {"content": [{"token": "a", "logprob": 0.5}]}, {"content": [{"token": "a", "logprob": -1, "top_logprobs": 3}]},
    {"tokens": ["a"], "token_logprobs": []}, {"content": [{"token": 7, "logprob": -1}]},
])
def test_malformed_logprobs_are_one_line(logprobs: object) -> None:
    with pytest.raises(EngineError, match="^The server sent"):
        records({"logprobs": logprobs})


def test_a_missing_logprob_is_impossible_not_made_up() -> None:
    [record] = records({"logprobs": {"content": [{"token": "a", "logprob": None}]}})
    assert record.logprob == -math.inf


def test_an_event_says_only_what_the_server_said() -> None:
    record = TokenRecord(9, "Ġcat", -3.0, ())
    event = token_event(0, record, " cat", 5)
    assert (event.sampled_prob, event.entropy, event.rank) == (None, None, None)  # not in a top-N: unknown
    listed = TokenRecord(9, "x", -1.0, (Alternative(1, "y", -0.5), Alternative(9, "x", -1.0)))
    assert token_event(0, listed, "x", 5).rank == 2
    assert piece_text("Ġcat") == " cat"


def test_request_bodies_send_only_what_is_on() -> None:
    body = sampling_fields(SamplingParams(temperature=0.0, max_tokens=3, top_k=0, min_p=0.0,
                                          repetition_penalty=1.0), 4)
    assert body == {"temperature": 0.0, "max_tokens": 3, "logprobs": True, "top_logprobs": 4}
    assert sampling_fields(SamplingParams(top_k=5, seed=3), 0)["top_k"] == 5
    assert "top_logprobs" not in sampling_fields(SamplingParams(), 0)


def test_each_server_gets_its_own_names_and_llama_cpp_every_filter() -> None:
    params = SamplingParams(top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.2, repetition_context_size=64)
    llama = sampling_fields(params, 3, "llama.cpp")
    assert (llama["top_k"], llama["top_p"], llama["min_p"]) == (0, 1.0, 0.0)  # its defaults are 40, 0.95, 0.05
    assert (llama["repeat_penalty"], llama["repeat_last_n"]) == (1.2, 64)
    mlx = sampling_fields(params, 3, "mlx_lm.server")
    assert mlx["repetition_context_size"] == 64 and "presence_context_size" not in mlx
    assert "repeat_penalty" not in sampling_fields(params, 3, "vLLM")


def test_usage_gives_the_cached_token_count() -> None:
    assert usage_counts({"usage": {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 8}}}) == (10, 8)
    assert usage_counts({"usage": {"prompt_tokens": 10}}) == (10, 0)
    assert usage_counts({"choices": []}) is None
    assert usage_counts({"timings": {"cache_n": 30, "prompt_n": 4}}) == (34, 30)  # llama.cpp


def test_urls_and_statuses_are_one_line() -> None:
    assert normalise_url("127.0.0.1:8080/v1/") == "http://127.0.0.1:8080"
    with pytest.raises(EngineError, match="http"):
        normalise_url("ftp://x")
    assert status_problem(401, '{"error": {"message": "bad key"}}', "http://h") == (
        "The server at http://h refused the API key (401): set the key's environment variable "
        "([engine] api_key_env): bad key")
    assert "\n" not in status_problem(500, "line one\nline two", "http://h")
