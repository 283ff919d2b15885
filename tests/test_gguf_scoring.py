"""#33.1-3 on the GGUF engine: scores equal llama.cpp's own logits for the same ids, computed
independently here through llama-cpp-python's low-level API (a fresh context, one ``llama_decode``
with the logits of every token), cold and from the cache; a plain text's perplexity equals the
perplexity llama.cpp's logits give for the same text and context size; probes leave the chat's
sequence as it was."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import GREEDY, reply, run
from test_gguf import CHAT, gguf_engine, needs_llama, pair  # noqa: F401 - fixtures

from engine.core.api import Message, ProbeRequest, ScoreRequest
from engine.local.client import Engine

pytestmark = needs_llama
TEXT = "the cat sat on the mat. the dog ran after the cat, and the bird flew away over the house. " * 2


def llama_rows(path: Path, ids: list[int], n_ctx: int = 512) -> np.ndarray:
    """log softmax (float64) of llama.cpp's logits for every position of `ids`: llama-cpp-python's
    low-level API on a fresh context of `n_ctx` positions (float32 KV, no flash attention: the
    context the engine makes for an all-F32 file), one decode with every logit asked."""
    import llama_cpp as lc

    lc.llama_backend_init()
    mparams = lc.llama_model_default_params()
    model = lc.llama_model_load_from_file(str(path).encode(), mparams)
    cparams = lc.llama_context_default_params()
    cparams.n_ctx = n_ctx
    cparams.n_batch = cparams.n_ubatch = max(len(ids), 8)
    cparams.type_k = cparams.type_v = 0  # GGML_TYPE_F32
    cparams.flash_attn_type = 0  # disabled
    ctx = lc.llama_init_from_model(model, cparams)
    batch = lc.llama_batch_init(len(ids), 0, 1)
    try:
        for i, token in enumerate(ids):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, i, 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1
        batch.n_tokens = len(ids)
        assert lc.llama_decode(ctx, batch) == 0
        vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(model))
        logits = np.ctypeslib.as_array(lc.llama_get_logits(ctx), shape=(len(ids), vocab)).astype(np.float64)
    finally:
        lc.llama_batch_free(batch)
        lc.llama_free(ctx)
        lc.llama_model_free(model)
    m = logits.max(axis=-1, keepdims=True)
    return logits - (m + np.log(np.exp(logits - m).sum(axis=-1, keepdims=True)))


def llama_tokens(path: Path, text: str) -> list[int]:
    """llama.cpp's tokenization of a document, as its perplexity tool does it (add_special, not parse_special)."""
    import llama_cpp as lc

    lc.llama_backend_init()
    params = lc.llama_model_default_params()
    params.vocab_only = True
    model = lc.llama_model_load_from_file(str(path).encode(), params)
    try:
        vocab = lc.llama_model_get_vocab(model)
        raw = text.encode()
        out = (lc.llama_token * (len(raw) + 8))()
        count = lc.llama_tokenize(vocab, raw, len(raw), out, len(raw) + 8, True, False)
        return list(out[:count])
    finally:
        lc.llama_model_free(model)


def check(scored, rows: np.ndarray, candidates: int) -> None:  # type: ignore[no-untyped-def]
    for token in scored.tokens:
        lp = rows[token.index - 1]
        assert token.logprob == pytest.approx(lp[token.id], abs=1e-4)
        assert token.rank == 1 + int(np.sum(lp > lp[token.id] + 1e-6))
        assert token.entropy == pytest.approx(float(-np.sum(np.exp(lp) * lp)), abs=1e-4)
        assert [round(c.logprob, 4) for c in token.candidates] == \
            [round(float(v), 4) for v in np.sort(lp)[::-1][:candidates]]


async def test_a_chat_scores_as_llama_cpp_computes_it_cold_and_cached(pair: tuple[Path, Path],
                                                                      gguf_engine: Engine) -> None:
    chat = (Message("system", "you are a cat"), *CHAT)
    first = await gguf_engine.score(ScoreRequest(chat, candidates=4))
    check(first, llama_rows(pair[1], list(first.ids)), 4)
    _, done = await run(gguf_engine, chat, GREEDY)
    assert done.reused_tokens == len(done.prompt_ids) - 1
    longer = (*chat, reply(done), Message("user", "and the dog?"))
    again = await gguf_engine.score(ScoreRequest(longer, candidates=4))
    assert again.reused_tokens >= len(first.ids) - 2
    check(again, llama_rows(pair[1], list(again.ids)), 4)
    user = again.messages[-1]
    assert "".join(t.text for t in again.tokens[user.start - 1:user.end - 1]).strip() == "and the dog?"


async def test_a_text_s_perplexity_is_llama_cpp_s(pair: tuple[Path, Path], gguf_engine: Engine) -> None:
    scored = await gguf_engine.score(ScoreRequest(text=TEXT, candidates=0))
    ids = llama_tokens(pair[1], TEXT)
    assert list(scored.ids) == ids
    rows = llama_rows(pair[1], ids)
    nll = -np.array([rows[i - 1][ids[i]] for i in range(1, len(ids))])
    assert scored.perplexity == pytest.approx(math.exp(nll.mean()), rel=1e-5)


async def test_probes_leave_the_chat_s_sequence_as_it_was(pair: tuple[Path, Path], gguf_engine: Engine) -> None:
    scored = await gguf_engine.score(ScoreRequest(CHAT, candidates=2))
    position = scored.messages[0].start + 2
    results = await gguf_engine.probe(ProbeRequest(ScoreRequest(CHAT), position, (" the dog", " cat")))
    for result in results:
        rows = llama_rows(pair[1], list(scored.ids[:position]) + list(result.ids))
        expected = [rows[position - 1 + j][t] for j, t in enumerate(result.ids)]
        assert result.logprobs == pytest.approx(expected, abs=1e-4)
        first = rows[position - 1]
        assert result.first_rank == 1 + int(np.sum(first > first[result.ids[0]] + 1e-6))
    again = await gguf_engine.score(ScoreRequest(CHAT, candidates=2))
    assert again.reused_tokens == len(again.ids) - 1 and again.tokens == scored.tokens
    events, done = await run(gguf_engine, CHAT, GREEDY)  # the chat's cells were untouched by the probe
    assert done.reused_tokens == len(done.prompt_ids) - 1


async def test_a_scoring_turn_on_llama_cpp_keeps_the_prompt_s_rows(pair: tuple[Path, Path], gguf_engine: Engine) -> None:
    from engine.core.api import GenerateRequest

    plain = [item async for item in gguf_engine.generate(GenerateRequest(CHAT, GREEDY))][-1]
    await gguf_engine.score(ScoreRequest(text="something else"))  # a cold cache for the scoring turn
    done = [item async for item in gguf_engine.generate(GenerateRequest(CHAT, GREEDY, score_candidates=2))][-1]
    assert done.token_ids == plain.token_ids  # the same reply: only the prefill differs
    scored = await gguf_engine.score(ScoreRequest((*CHAT, reply(done)), candidates=2, continue_last=True))
    assert scored.reused_tokens >= len(done.prompt_ids) - 2
    check(scored, llama_rows(pair[1], list(scored.ids)), 2)
