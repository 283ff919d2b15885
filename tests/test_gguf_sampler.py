"""The GGUF engine's numpy sampler is an exact twin of the MLX one (`engine.local.sampling`).

Same seed, same parameters, same logits: the same tokens, and every number of the packed row
within float32 rounding. Run on every filter combination, with and without penalties, at a small
vocabulary (whole-vocabulary sorts) and one above `SMALL_VOCAB` (short lists, the top-p fallback).
"Within float32 rounding" is 5e-4 relative: MLX's CPU sum adds a 16k vocabulary one by one in
float32 (1e-5 off already for the softmax's normaliser), numpy sums pairwise;
`test_statistics_are_the_definitions` checks numpy against float64 at 1e-5.
"""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np
import pytest

from engine.core.api import SamplingParams
from engine.core.params import LOGITSCOPE_ORDER

MIXED = ("penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "temperature", "min_p", "xtc")
TOP_P_FIRST = ("penalties", "dry", "top_n_sigma", "top_p", "typ_p", "top_k", "min_p", "xtc", "temperature")
from engine.gguf.sampler import NumpySampler, shortlist, statistics
from engine.local.sampling import HEADER, LiveSampler, SMALL_VOCAB

PARAMS = {
    "greedy": SamplingParams(temperature=0.0),
    "greedy, no candidates": SamplingParams(temperature=0.0, candidates=0),
    "temperature": SamplingParams(temperature=0.8),
    "top-k": SamplingParams(temperature=1.0, top_k=7),
    "top-k + top-p": SamplingParams(temperature=0.9, top_k=40, top_p=0.6),
    "top-k + min-p": SamplingParams(temperature=1.3, top_k=20, min_p=0.05),
    "top-p": SamplingParams(temperature=1.0, top_p=0.9),
    "top-p, tight": SamplingParams(temperature=0.5, top_p=0.3, candidates=3),
    "min-p": SamplingParams(temperature=1.0, min_p=0.1),
    "top-p + min-p": SamplingParams(temperature=0.7, top_p=0.95, min_p=0.02),
    "penalties": SamplingParams(temperature=0.8, repetition_penalty=1.3, presence_penalty=0.4,
                                frequency_penalty=0.2, repetition_context_size=16),
    "greedy + repetition": SamplingParams(temperature=0.0, repetition_penalty=1.5),
    # the order: logitscope's (the filters read the tempered distribution), and a mixed one
    "top-k + top-p, logitscope order": SamplingParams(temperature=0.9, top_k=40, top_p=0.6, samplers=LOGITSCOPE_ORDER),
    "top-p + min-p, logitscope order": SamplingParams(temperature=0.7, top_p=0.95, min_p=0.02, samplers=LOGITSCOPE_ORDER),
    "top-p + min-p, mixed order": SamplingParams(temperature=0.7, top_p=0.95, min_p=0.02, samplers=MIXED),
    "top-k + top-p + min-p, mixed order": SamplingParams(temperature=1.4, top_k=50, top_p=0.9, min_p=0.05,
                                                         samplers=MIXED),
    # the extended chain (engine/local/chain.py): both engines run the same numpy stages
    "logit bias": SamplingParams(temperature=0.9, logit_bias=((0, 3.0), (5, -100.0), (8, -2.0))),
    "logit bias, greedy": SamplingParams(temperature=0.0, logit_bias=((7, 50.0),)),
    "DRY": SamplingParams(temperature=0.8, dry_multiplier=1.5, dry_allowed_length=1, dry_penalty_last_n=-1),
    "top-nσ": SamplingParams(temperature=1.1, top_n_sigma=1.5),
    "typical-p": SamplingParams(temperature=0.9, typical_p=0.7, top_k=60),
    "XTC": SamplingParams(temperature=1.0, xtc_probability=0.6, xtc_threshold=0.02),
    "dynamic temperature": SamplingParams(temperature=1.0, dynatemp_range=0.6, dynatemp_exponent=1.5, min_p=0.05),
    "mirostat v2": SamplingParams(temperature=0.9, mirostat=2, mirostat_tau=4.0, mirostat_eta=0.2),
    "top-p before top-k": SamplingParams(temperature=0.9, top_k=30, top_p=0.8, samplers=TOP_P_FIRST),
    "everything": SamplingParams(temperature=1.2, top_k=80, top_p=0.95, min_p=0.01, repetition_penalty=1.2,
                                 dry_multiplier=0.8, top_n_sigma=3.0, typical_p=0.95, xtc_probability=0.5,
                                 xtc_threshold=0.05, dynatemp_range=0.3, logit_bias=((2, 1.0),)),
}


def _logits(rng: np.random.Generator, vocab: int, flat: bool) -> np.ndarray:
    """Peaked or flat rows: a flat one makes top-p's short list too short (the exact fallback)."""
    scale = 0.05 if flat else 3.0
    return (rng.standard_normal(vocab) * scale).astype(np.float32)


def _run_both(params: SamplingParams, vocab: int, steps: int, flat: bool = False) -> tuple[list, list]:
    """Rows from both samplers over `steps` positions, feeding each its own chosen tokens."""
    rng = np.random.default_rng(vocab + steps)
    ours = NumpySampler(vocab, params, seed=1234)
    theirs = LiveSampler(vocab, params, seed=1234, compiled=False)
    context: list[int] = [3, 5, 5, 8, 13]
    rows_np, rows_mx = [], []
    for _ in range(steps):
        logits = _logits(rng, vocab, flat)
        ctx = np.array(context, dtype=np.int32)
        row_np = statistics(ours.choose(logits, ctx if ours.uses_context else None))
        _, packed = theirs.step(mx.array(logits), mx.array(ctx) if theirs.uses_context else None)
        row_mx = packed.tolist()
        rows_np.append(row_np)
        rows_mx.append(row_mx)
        context.append(int(row_mx[0]))
    return rows_np, rows_mx


def _assert_rows_match(rows_np: list, rows_mx: list) -> None:
    for a, b in zip(rows_np, rows_mx, strict=True):
        assert len(a) == len(b)
        n = (len(a) - HEADER) // 3
        assert int(a[0]) == int(b[0]), "the same token"
        assert int(a[3]) == int(b[3]), "the same rank"
        assert a[HEADER:HEADER + n] == b[HEADER:HEADER + n], "the same candidates, in the same order"
        for x, y in zip(a[1:3] + [a[4]] + a[HEADER + n:], b[1:3] + [b[4]] + b[HEADER + n:], strict=True):
            # MLX's CPU sum is sequential in float32 (1e-5 off at 16k values), numpy's pairwise
            assert math.isclose(x, y, rel_tol=5e-4, abs_tol=1e-6), (x, y)


@pytest.mark.parametrize("name", sorted(PARAMS))
@pytest.mark.parametrize("vocab", [300, SMALL_VOCAB * 2 + 17])
def test_numpy_sampler_matches_mlx_sampler(name: str, vocab: int) -> None:
    _assert_rows_match(*_run_both(PARAMS[name], vocab, steps=12))


@pytest.mark.parametrize("name", ["top-p", "top-p + min-p", "top-k + top-p"])
def test_top_p_fallback_on_flat_distributions_matches(name: str) -> None:
    """A nearly flat row: the 1,024-token short list holds less than top-p's mass, so the
    threshold comes from the full sort (both samplers)."""
    _assert_rows_match(*_run_both(PARAMS[name], SMALL_VOCAB * 2 + 17, steps=4, flat=True))


def test_live_parameter_change_keeps_the_uniform_sequence() -> None:
    """One uniform number per token whatever the parameters, as the MLX sampler draws: switching
    from greedy to sampling mid-turn gives the tokens a sampler that sampled throughout gives."""
    vocab = 500
    rng = np.random.default_rng(7)
    rows = [_logits(rng, vocab, False) for _ in range(6)]
    switched = NumpySampler(vocab, PARAMS["greedy"], seed=99)
    sampled = NumpySampler(vocab, PARAMS["temperature"], seed=99)
    for i, logits in enumerate(rows):
        if i == 3:
            switched.set_params(PARAMS["temperature"])
        a, b = switched.choose(logits, None), sampled.choose(logits, None)
        if i >= 3:
            assert a.token == b.token


def test_statistics_are_the_definitions() -> None:
    """Independent of either sampler: logprob, entropy and rank from their definitions in float64."""
    rng = np.random.default_rng(3)
    logits = _logits(rng, 1000, False)
    draw = NumpySampler(1000, SamplingParams(temperature=1.0, top_k=50), seed=5).choose(logits, None)
    row = statistics(draw)
    x = logits.astype(np.float64)
    logp = x - x.max() - np.log(np.exp(x - x.max()).sum())
    assert row[1] == pytest.approx(logp[draw.token], abs=1e-5)
    assert row[4] == pytest.approx(-(np.exp(logp) * logp).sum(), abs=1e-5)
    assert int(row[3]) == int((logp > logp[draw.token]).sum()) + 1
    assert [int(i) for i in row[HEADER:HEADER + 10]] == list(np.argsort(-x)[:10])
    top = np.argsort(-x)[:50]
    sampled = np.exp(x[top] - x[top].max()) / np.exp(x[top] - x[top].max()).sum()
    assert row[2] == pytest.approx(sampled[list(top).index(draw.token)], abs=1e-6)
    assert row[HEADER + 20:] == pytest.approx(list(sampled[:10]), abs=1e-6)


def test_the_draw_does_not_keep_llama_cpp_s_buffer() -> None:
    """The statistics run while llama.cpp decodes the next position into the same buffer."""
    buffer = np.arange(50, dtype=np.float32)
    draw = NumpySampler(50, SamplingParams(temperature=0.0), seed=1).choose(buffer, None)
    buffer[:] = 0.0
    assert statistics(draw)[0] == 49.0 and statistics(draw)[3] == 1.0


def test_shortlist_breaks_ties_by_id() -> None:
    x = np.array([1.0, 3.0, 3.0, 2.0, 3.0], dtype=np.float32)
    assert shortlist(x, 3).tolist() == [1, 2, 4]
    assert shortlist(x, 5).tolist() == [1, 2, 4, 3, 0]


def test_nan_logits_give_a_row_the_turn_refuses() -> None:
    """The turn checks the row's header floats (`logits_were_numbers`), as for the MLX sampler."""
    from engine.local.sampling import logits_were_numbers

    logits = np.zeros(20, dtype=np.float32)
    logits[4] = np.nan
    for params in (PARAMS["greedy"], PARAMS["top-p"], PARAMS["top-k"]):
        row = statistics(NumpySampler(20, params, seed=1).choose(logits, None))
        assert not logits_were_numbers(row)


@pytest.mark.parametrize("vocab", [40, 5000, 160_000])
def test_shortlist_cuts_through_ties_by_id(vocab: int) -> None:
    """Equal values across the cut: the lower ids make it, whatever numpy's partition picked
    (it picked ids 1660-1665 of 4,996 zeros at a 5,000 vocabulary)."""
    x = np.zeros(vocab, dtype=np.float32)
    x[[7, 30, vocab - 3, vocab - 1]] = 2.0
    assert shortlist(x, 10).tolist() == [7, 30, vocab - 3, vocab - 1, 0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("vocab", [1000, 32_000, 32_003, 151_936])
@pytest.mark.parametrize("size", [1, 10, 64, 300])
def test_shortlist_matches_a_full_sort(vocab: int, size: int) -> None:
    """The folded search (`engine.local.topn`) against the definition: a stable sort of the row."""
    rng = np.random.default_rng(vocab + size)
    x = (rng.standard_normal(vocab) * 3).astype(np.float32)
    x[rng.integers(0, vocab, 40)] = x.max()  # ties at the top too
    assert shortlist(x, size).tolist() == np.argsort(-x, kind="stable")[:size].tolist()
