"""`engine.local.sampling` at its edges: no candidates, top-k above the vocabulary, bf16 and batched
logits, penalty windows, masked logits, malformed rows (references in test_sampling)."""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np
import pytest
from test_sampling import (
    CONTEXT, VOCAB, as_row, crafted_logits, draw, one_step, ref_entropy, ref_logprobs, ref_penalized, ref_sampled,
)

from engine.core.api import SamplingParams
from engine.local.sampling import LiveSampler

# ---------------------------------------------------------------------------------------------
# Edges
# ---------------------------------------------------------------------------------------------


def test_candidates_zero() -> None:
    stats = one_step(crafted_logits(), SamplingParams(candidates=0, top_p=0.9))
    assert stats.candidates == () and 0 <= stats.id < VOCAB


def test_top_k_above_vocab_is_off() -> None:
    logits = crafted_logits()
    stats = one_step(logits, SamplingParams(temperature=0.9, top_k=1000, candidates=VOCAB))
    ref = ref_sampled(logits, SamplingParams(temperature=0.9))
    np.testing.assert_allclose([c[2] for c in stats.candidates], ref[[c[0] for c in stats.candidates]], atol=2e-6)


def test_bf16_and_batched_logits() -> None:
    logits = mx.array(crafted_logits()).astype(mx.bfloat16).reshape(1, VOCAB)
    params = SamplingParams(temperature=0.8, top_p=0.9, candidates=5)
    sampler = LiveSampler(VOCAB, params, 0)
    token, packed = sampler.step(logits, mx.array([], dtype=mx.int32))
    stats = LiveSampler.unpack(as_row(packed), 5)
    x = np.array(logits.astype(mx.float32)).reshape(-1).astype(np.float64)
    ids = [c[0] for c in stats.candidates]
    assert ids[0] == int(np.argmax(x)) and token.shape == (1,)
    np.testing.assert_allclose([c[1] for c in stats.candidates], ref_logprobs(x)[ids], atol=2e-5)
    np.testing.assert_allclose([c[2] for c in stats.candidates], ref_sampled(x, params, False)[ids], atol=2e-6)


def test_penalties_use_only_the_window() -> None:
    logits = crafted_logits()
    params = SamplingParams(temperature=1.0, repetition_penalty=2.0, presence_penalty=1.0,
                            frequency_penalty=0.5, repetition_context_size=4, candidates=VOCAB)
    context = [0, 1, 1, 2, 30, 31, 31, 32]  # 0, 1, 2 lie before the window of 4
    stats = one_step(logits, params, context)
    got = {c[0]: c[1] for c in stats.candidates}
    lp = ref_logprobs(ref_penalized(logits, context, params))
    np.testing.assert_allclose([got[i] for i in range(VOCAB)], lp, atol=2e-5)
    unpenalized = ref_logprobs(ref_penalized(logits, context[-4:], params))
    np.testing.assert_allclose(lp, unpenalized)
    shift = lp - ref_logprobs(logits.astype(np.float64))
    assert np.ptp(shift[[0, 1, 2, 5, 6]]) < 1e-9  # outside the window: only renormalised
    assert np.all(shift[[30, 31, 32]] < shift[0] - 0.1)  # in the window: every penalty lowers them


def test_switched_off_penalties_change_nothing() -> None:
    logits = crafted_logits()
    plain = one_step(logits, SamplingParams(candidates=VOCAB), CONTEXT)
    off = SamplingParams(candidates=VOCAB, repetition_penalty=1.5, presence_penalty=1.0, repetition_context_size=0)
    assert one_step(logits, off, CONTEXT).candidates == plain.candidates


def test_masked_logits_are_never_drawn() -> None:
    logits = crafted_logits()
    logits[[int(np.argmax(logits)), 4, 9]] = -np.inf
    params = SamplingParams(temperature=2.0, candidates=VOCAB)
    stats = one_step(logits, params)
    assert math.isfinite(stats.entropy) and stats.entropy == pytest.approx(ref_entropy(logits.astype(np.float64)), abs=2e-5)
    tokens = draw(LiveSampler(VOCAB, params, 3), logits, [], 500)
    assert not set(tokens.tolist()) & {int(np.argmax(crafted_logits())), 4, 9}


def test_unpack_rejects_a_malformed_row() -> None:
    with pytest.raises(ValueError):
        LiveSampler.unpack([1.0, 0.0, 1.0, 1.0, 0.5, 3.0], 1)
    with pytest.raises(ValueError):
        LiveSampler.unpack([1.0, 0.0, 1.0, 1.0, 0.5] + [0.0] * 6, 1)
