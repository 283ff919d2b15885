"""`engine.local.sampling` against an independent NumPy reference of the definitions in `engine.core.api`.

The reference below is written from the docstrings (float64, full sorts, no shortcuts), so the
partial-sort / threshold tricks of the real sampler are checked, not re-used. Draws are checked
with a chi-square test (fixed seeds, so deterministic), and a meta-test shows the same test would
reject a sampler that ran the chain in the wrong order.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, cast

import mlx.core as mx
import numpy as np
import pytest

import engine.local.sampling as sampling
from engine.core.api import SamplingParams
from engine.core.params import LOGITSCOPE_ORDER
from engine.local.sampling import LiveSampler, TokenStats

# ---------------------------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------------------------


def ref_penalized(logits: np.ndarray, context: list[int], p: SamplingParams) -> np.ndarray:
    """Logits after repetition / presence / frequency penalties over the window."""
    x = logits.astype(np.float64).copy()
    if p.repetition_context_size == 0 or not context:
        return x
    ids, counts = np.unique(np.array(context[-p.repetition_context_size :]), return_counts=True)
    sel = x[ids]
    x[ids] = np.where(sel < 0, sel * p.repetition_penalty, sel / p.repetition_penalty)
    x[ids] -= p.presence_penalty
    x[ids] -= p.frequency_penalty * counts
    return x


def ref_logprobs(x: np.ndarray) -> np.ndarray:
    m = x.max()
    return x - m - np.log(np.sum(np.exp(x - m)))


def ref_sampled(x: np.ndarray, p: SamplingParams, check_margins: bool = True, margin: float = 1e-4) -> np.ndarray:
    """p_sampled: top-k -> top-p -> min-p, renormalised (one-hot when greedy), each filter reading
    the temperature-scaled distribution when the order (`SamplingParams.samplers`) puts the
    temperature before it, else the distribution at temperature 1; drawn at the temperature.

    `margin`: how far every cumulative sum / ratio must stay from the thresholds, so float32
    rounding in the sampler cannot flip a token (checked unless `check_margins` is off)."""
    vocab = x.shape[0]
    if p.temperature == 0:
        return np.eye(vocab)[int(np.argmax(x))]
    prob = np.exp(ref_logprobs(x / p.temperature))
    flat = np.exp(ref_logprobs(x))
    stages = p.samplers

    def source(stage: str) -> np.ndarray:
        return prob if stages.index("temperature") < stages.index(stage) else flat

    keep = np.ones(vocab, dtype=bool)
    if 0 < p.top_k < vocab:
        keep[:] = False
        keep[np.argsort(-prob, kind="stable")[: p.top_k]] = True
    if p.top_p < 1.0:
        src = source("top_p")
        q = np.where(keep, src, 0.0) / src[keep].sum()
        order = np.argsort(-q, kind="stable")
        cum = np.cumsum(q[order])
        crossing = int(np.searchsorted(cum, p.top_p))  # first index with cum >= top_p
        if check_margins:
            assert np.min(np.abs(cum[q[order] > 0] - p.top_p)) > margin, "fragile test data"
        keep &= q >= q[order[crossing]]
    if p.min_p > 0.0:
        q = np.where(keep, source("min_p"), 0.0)
        if check_margins:
            assert np.min(np.abs(q[keep] / q.max() - p.min_p)) > margin, "fragile test data"
        keep &= q >= p.min_p * q.max()
    out = np.where(keep, prob, 0.0)
    return out / out.sum()


def ref_entropy(x: np.ndarray) -> float:
    lp = ref_logprobs(x)
    p = np.exp(lp)
    return float(-np.sum(p[p > 0] * lp[p > 0]))


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

VOCAB = 50


def crafted_logits(vocab: int = VOCAB, seed: int = 0, scale: float = 1.6) -> np.ndarray:
    """Distinct logits of both signs, a few clearly ahead, a long tail: every filter bites."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=vocab) * scale + 0.5).astype(np.float32)


def as_row(packed: mx.array) -> list[float]:
    return cast(list[float], packed.tolist())


def one_step(
    logits: np.ndarray, params: SamplingParams, context: list[int] = (), seed: int = 0  # type: ignore[assignment]
) -> TokenStats:
    sampler = LiveSampler(logits.shape[-1], params, seed)
    token, packed = sampler.step(mx.array(logits), mx.array(list(context), dtype=mx.int32))
    stats = LiveSampler.unpack(as_row(packed), params.candidates)
    assert token.shape == (1,) and token.dtype == mx.int32 and token.item() == stats.id
    return stats


def draw(sampler: LiveSampler, logits: np.ndarray, context: list[int], n: int) -> np.ndarray:
    """n tokens from n steps; evaluated in batches so Python overhead stays small."""
    x = mx.array(logits)
    ctx = mx.array(context, dtype=mx.int32)
    tokens: list[mx.array] = []
    for i in range(n):
        tokens.append(sampler.step(x, ctx)[0])
        if (i + 1) % 500 == 0:
            mx.eval(tokens[-500:])
    return np.array(mx.concatenate(tokens).tolist())


def chi_square_z(counts: np.ndarray, probs: np.ndarray) -> float:
    """Wilson-Hilferty z-score of Pearson's chi-square (bins with < 5 expected are merged).

    Any draw of a token the reference gives probability 0 returns +inf.
    """
    n = counts.sum()
    if counts[probs == 0].sum() > 0:
        return math.inf
    expected = probs * n
    big = expected >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    obs, exp = obs[exp > 0], exp[exp > 0]
    stat = float(np.sum((obs - exp) ** 2 / exp))
    dof = len(obs) - 1
    return ((stat / dof) ** (1 / 3) - (1 - 2 / (9 * dof))) / math.sqrt(2 / (9 * dof))


CONTEXT = [3, 7, 7, 7, 11, 2, 2, 40, 41, 5, 9, 9, 12]  # the window (8) starts at index 5

CHAINS = {
    "temperature": SamplingParams(temperature=0.8),
    "top_k": SamplingParams(temperature=1.3, top_k=6),
    "top_p": SamplingParams(temperature=0.7, top_p=0.8, samplers=LOGITSCOPE_ORDER),
    "min_p": SamplingParams(temperature=1.5, min_p=0.1, samplers=LOGITSCOPE_ORDER),
    "combined": SamplingParams(temperature=1.2, top_k=12, top_p=0.85, min_p=0.05, samplers=LOGITSCOPE_ORDER),
    # llama.cpp's order (the default): the filters read temperature 1, the draw is at the temperature
    "top_p, llama.cpp": SamplingParams(temperature=0.7, top_p=0.8),
    "min_p, llama.cpp": SamplingParams(temperature=1.5, min_p=0.1),
    "combined, llama.cpp": SamplingParams(temperature=1.2, top_k=12, top_p=0.85, min_p=0.05),
    "mixed order": SamplingParams(temperature=1.3, top_p=0.8, min_p=0.12, samplers=(
        "penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "temperature", "min_p", "xtc")),
    "penalties": SamplingParams(
        temperature=1.0, repetition_penalty=1.8, presence_penalty=0.7, frequency_penalty=0.4,
        repetition_context_size=8,
    ),
}

# ---------------------------------------------------------------------------------------------
# Distributions: exact probabilities, then draws
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CHAINS))
def test_stats_equal_reference(name: str) -> None:
    """With candidates = vocab the row holds every token's logprob and sampled prob."""
    params = CHAINS[name].with_changes(candidates=VOCAB)
    logits = crafted_logits()
    stats = one_step(logits, params, CONTEXT, seed=5)
    x = ref_penalized(logits, CONTEXT, params)
    lp, sp = ref_logprobs(x), ref_sampled(x, params)
    ids = [c[0] for c in stats.candidates]
    assert ids == list(np.argsort(-lp, kind="stable"))
    np.testing.assert_allclose([c[1] for c in stats.candidates], lp[ids], atol=2e-5)
    np.testing.assert_allclose([c[2] for c in stats.candidates], sp[ids], atol=2e-6)
    assert stats.rank == 1 + int(np.sum(lp > lp[stats.id]))
    assert stats.logprob == pytest.approx(lp[stats.id], abs=2e-5)
    assert stats.sampled_prob == pytest.approx(sp[stats.id], abs=2e-6) and sp[stats.id] > 0
    assert stats.entropy == pytest.approx(ref_entropy(x), abs=2e-5)


@functools.lru_cache(maxsize=None)
def histogram(name: str) -> tuple[int, ...]:
    """Counts of 2000 draws for one chain (shared by the tests below: draws cost ~0.5 ms each)."""
    params = CHAINS[name].with_changes(candidates=0)
    tokens = draw(LiveSampler(VOCAB, params, 1234), crafted_logits(), CONTEXT, 2000)
    return tuple(np.bincount(tokens, minlength=VOCAB).tolist())


@pytest.mark.parametrize("name", list(CHAINS))
def test_draws_follow_reference(name: str) -> None:
    params = CHAINS[name]
    probs = ref_sampled(ref_penalized(crafted_logits(), CONTEXT, params), params)
    assert chi_square_z(np.array(histogram(name)), probs) < 4.0


def filters_before_temperature(x: np.ndarray, p: SamplingParams) -> np.ndarray:
    """A wrong chain for logitscope's order: the filters judge the untempered distribution."""
    kept = ref_sampled(x, p.with_changes(temperature=1.0), check_margins=False) > 0
    out = np.where(kept, np.exp((x - x.max()) / p.temperature), 0.0)
    return out / out.sum()


def filters_after_temperature(x: np.ndarray, p: SamplingParams) -> np.ndarray:
    """A wrong chain for llama.cpp's order: the filters judge the tempered distribution."""
    return ref_sampled(x, p.with_changes(samplers=LOGITSCOPE_ORDER), check_margins=False)


def top_p_before_top_k(x: np.ndarray, p: SamplingParams) -> np.ndarray:
    """A wrong chain: top-p measures mass over the whole vocabulary, not the top-k survivors."""
    prob = np.exp(ref_logprobs(x / p.temperature))
    order = np.argsort(-prob, kind="stable")
    crossing = int(np.searchsorted(np.cumsum(prob[order]), p.top_p))
    kept = (prob >= prob[order[crossing]]) & np.isin(np.arange(x.shape[0]), order[: p.top_k])
    kept &= prob >= p.min_p * prob[kept].max()
    out = np.where(kept, prob, 0.0)
    return out / out.sum()


@pytest.mark.parametrize(
    ("name", "wrong"),
    [
        ("top_p", filters_before_temperature),
        ("min_p", filters_before_temperature),
        ("top_p, llama.cpp", filters_after_temperature),
        ("min_p, llama.cpp", filters_after_temperature),
        ("combined", top_p_before_top_k),
        ("combined", lambda x, p: ref_sampled(x, p.with_changes(top_k=0), check_margins=False)),
    ],
)
def test_chi_square_rejects_a_wrong_chain(name: str, wrong: Callable[[np.ndarray, SamplingParams], np.ndarray]) -> None:
    """The draw test has power: the same histogram fails against a chain in the wrong order."""
    params = CHAINS[name]
    x = ref_penalized(crafted_logits(), CONTEXT, params)
    wrong_probs = wrong(x, params)
    assert 0.5 * np.abs(wrong_probs - ref_sampled(x, params)).sum() > 0.1  # genuinely different
    assert chi_square_z(np.array(histogram(name)), wrong_probs) > 4.0


def between_crossings(x: np.ndarray, p: SamplingParams) -> SamplingParams:
    """`p` with top_p moved halfway between two cumulative sums, away from float32 rounding.

    With 3000 near-equal tokens some cumulative sum always lies within 1e-4 of a round top_p.
    """
    if p.top_p == 1.0:
        return p
    kept = ref_sampled(x, p.with_changes(top_p=1.0, min_p=0.0), check_margins=False)
    cum = np.cumsum(np.sort(kept)[::-1])
    j = int(np.searchsorted(cum, p.top_p))
    return p.with_changes(top_p=float(cum[j - 1] + cum[j]) / 2)


@pytest.mark.parametrize(
    ("params", "scale"),
    [
        (SamplingParams(temperature=0.7, top_p=0.9), 4.0),  # peaked: the short list suffices
        (SamplingParams(temperature=1.0, top_p=0.9), 0.3),  # flat: needs the full-sort fallback
        (SamplingParams(temperature=1.0, top_p=0.5, min_p=0.3), 0.3),
        (SamplingParams(temperature=0.9, top_k=300, top_p=0.95), 0.3),  # bucket 512 of 3000
        (SamplingParams(temperature=1.1, min_p=0.2), 1.0),
    ],
)
@pytest.mark.parametrize("vocab", [3000, 9000])
def test_large_vocab_matches_reference(params: SamplingParams, scale: float, vocab: int) -> None:
    """Vocab 3000 is sorted whole (<= SMALL_VOCAB); 9000 goes through the 1024 short list,
    argpartition and the fallback. Both must give the same exact distribution.

    In a flat distribution each token moves the kept mass by ~1/vocab, so an off-by-one top-p
    threshold shows in the sampled probability of the best candidate.
    """
    assert 3000 <= sampling.SMALL_VOCAB < 9000
    logits = crafted_logits(vocab, seed=3, scale=scale)
    x = logits.astype(np.float64)
    params = between_crossings(x, params.with_changes(candidates=20))
    stats = one_step(logits, params, seed=2)
    lp, sp = ref_logprobs(x), ref_sampled(x, params, margin=2e-5)  # 9000 flat tokens: crossings ~1e-4 apart
    ids = [c[0] for c in stats.candidates]
    assert ids == list(np.argsort(-lp, kind="stable")[:20])
    np.testing.assert_allclose([c[2] for c in stats.candidates], sp[ids], rtol=2e-5, atol=1e-9)
    assert stats.sampled_prob == pytest.approx(sp[stats.id], rel=2e-5) and sp[stats.id] > 0


def test_top_p_keeps_ties_with_the_crossing_token() -> None:
    logits = np.array([3.0, 1.0, 1.0, 1.0, 0.0, -1.0], dtype=np.float32)
    params = SamplingParams(temperature=1.0, top_p=0.8, candidates=6)
    stats = one_step(logits, params)
    sampled = {c[0]: c[2] for c in stats.candidates}
    assert sampled[1] == sampled[2] == sampled[3] > 0 and sampled[4] == sampled[5] == 0
    np.testing.assert_allclose([sampled[i] for i in range(6)], ref_sampled(logits, params, False), atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Greedy, seeds, live parameters
# ---------------------------------------------------------------------------------------------


def test_greedy_at_temperature_zero() -> None:
    logits = crafted_logits()
    best = int(np.argmax(logits))
    sampler = LiveSampler(VOCAB, SamplingParams(temperature=0.0, top_p=0.5, candidates=4), None)
    tokens = draw(sampler, logits, [], 30)
    assert set(tokens.tolist()) == {best}
    stats = one_step(logits, SamplingParams(temperature=0.0, candidates=4), seed=3)
    assert (stats.id, stats.sampled_prob, stats.rank) == (best, 1.0, 1)
    assert [c[2] for c in stats.candidates] == [1.0, 0.0, 0.0, 0.0]


def test_same_seed_same_tokens_different_seed_different() -> None:
    logits = crafted_logits(scale=0.5)
    params = SamplingParams(temperature=1.0, top_p=0.95)
    a = draw(LiveSampler(VOCAB, params, 42), logits, CONTEXT, 60)
    b = draw(LiveSampler(VOCAB, params, 42), logits, CONTEXT, 60)
    c = draw(LiveSampler(VOCAB, params, 43), logits, CONTEXT, 60)
    assert a.tolist() == b.tolist() and a.tolist() != c.tolist()
    assert LiveSampler(VOCAB, params, None).seed != LiveSampler(VOCAB, params, None).seed


def test_set_params_applies_from_next_step_without_recompiling(monkeypatch: pytest.MonkeyPatch) -> None:
    traces: list[sampling.Plan] = []
    original = sampling.build_graph

    def counting(*args: object) -> tuple[mx.array, mx.array]:
        traces.append(args[-1])  # type: ignore[arg-type]
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(sampling, "build_graph", counting)
    vocab = 37  # a shape no other test uses, so the first step must trace
    logits = crafted_logits(vocab, seed=8)
    context = [3, 7, 7, 7, 11, 2, 2, 30, 31, 5, 9, 9, 12]
    x, ctx = mx.array(logits), mx.array(context, dtype=mx.int32)
    first = SamplingParams(temperature=1.0, top_k=3, top_p=0.9, min_p=0.01, candidates=vocab,
                           repetition_penalty=1.2, repetition_context_size=8)
    sampler = LiveSampler(vocab, first, 7, compiled=True)
    sampler.step(x, ctx)[1].tolist()
    assert len(traces) == 1
    changes: list[dict[str, float]] = [dict(temperature=0.5), dict(top_k=4), dict(top_p=0.6), dict(min_p=0.2),
               dict(repetition_penalty=2.0), dict(presence_penalty=1.0)]
    params = first
    for change in changes:
        params = params.with_changes(**change)
        sampler.set_params(params)
        stats = LiveSampler.unpack(as_row(sampler.step(x, ctx)[1]), vocab)
        ref = ref_sampled(ref_penalized(logits, context, params), params, check_margins=False)
        np.testing.assert_allclose([ref[c[0]] for c in stats.candidates], [c[2] for c in stats.candidates], atol=2e-6)
    assert len(traces) == 1, "a value change recompiled the sampler"
    sampler.set_params(params.with_changes(top_k=1))  # always the best token from now on
    assert set(draw(sampler, logits, context, 20).tolist()) == {int(np.argmax(ref_penalized(logits, context, params)))}


@pytest.mark.parametrize("name", ["combined", "penalties", "min_p"])
def test_compiled_and_eager_cores_agree(name: str) -> None:
    """The GPU default (compiled) and the CPU default (eager) build the same graph."""
    params = CHAINS[name].with_changes(candidates=8)
    x, ctx = mx.array(crafted_logits()), mx.array(CONTEXT, dtype=mx.int32)
    samplers = [LiveSampler(VOCAB, params, 11, compiled=c) for c in (False, True)]
    for _ in range(5):
        eager, compiled = (s.step(x, ctx)[1].tolist() for s in samplers)
        np.testing.assert_allclose(eager, compiled, rtol=1e-6, atol=1e-7)
