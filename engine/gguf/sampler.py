"""The sampling chain and its statistics in numpy: the GGUF engine's exact twin of `engine.local.sampling`
and `engine.local.penalties`, split in two so the statistics overlap llama.cpp's next forward pass.

Why a twin: llama.cpp hands each logits row over in host memory, and the MLX sampler's per-token
cost on a CPU is mostly building its graph (~5-10 us per node): 0.47 ms a token at a 32k
vocabulary, 1.9 ms at 152k, next to llama.cpp's ~1.1-1.7 ms decode step of a 30M model. numpy
computes the same numbers in a fraction of that, with no graph.

Why split: llama.cpp needs the next token before it can decode its position, but not the
statistics (logprob, rank, entropy, candidates). `choose` does only what the draw needs (for
greedy decoding, one argmax) and `statistics` the rest, on another thread while llama.cpp
decodes (`engine.gguf.decoder`); numpy and llama.cpp both release the GIL while they compute.

Same definitions, same order of operations, float32 throughout, and the same per-turn generator
for the uniform numbers, so a seed gives the same tokens as in the MLX engine and the numbers
agree to float32 rounding (`tests/test_gguf_sampler.py` checks both on every filter combination).
Two choices the MLX code leaves to its sort are fixed here: short lists are ordered by the logit
before the softmax (the softmax is monotone, so this is the same order up to float32 rounding),
and exact ties keep the lower id first.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
import numpy as np

from engine.core.api import SamplingParams
from engine.local.chain import ExtendedChain, TokenVocab, needs_extended
from engine.local.sampling import Plan, make_plan, next_uniform, turn_seed
from engine.local.stages import NumpyPenalties, inverse_cdf, make_numpy_penalties, shortlist

__all__ = ["Draw", "NumpyPenalties", "NumpySampler", "inverse_cdf", "make_numpy_penalties", "shortlist", "statistics"]

F32 = np.float32


@dataclass(frozen=True)
class Draw:
    """What `choose` decided, and what `statistics` needs to describe it.

    `weights` are the filtered weights the token was drawn from, over `ids` (the top-k short
    list) when `on_shortlist`, else over the whole vocabulary, and `total` their sum: a sampled
    probability is ``weight / total`` (divided only where shown, not over the whole vocabulary
    on the way to the next token); None for greedy decoding. `logits` are after the penalties,
    owned by this draw (never llama.cpp's buffer, which the next decode overwrites).
    """

    token: int
    logits: np.ndarray
    plan: Plan
    ids: np.ndarray | None
    weights: np.ndarray | None
    total: np.float32
    on_shortlist: bool
    position: int  # the token's place in `ids` when `on_shortlist`


class NumpySampler:
    """Per-turn sampling state, as `engine.local.sampling.LiveSampler`: live parameters, one seeded
    generator per turn, one uniform number drawn per token (greedy or not, so a mid-turn switch
    keeps the sequence the MLX engine would use)."""

    def __init__(self, vocab_size: int, params: SamplingParams, seed: int | None, vocab: TokenVocab | None = None) -> None:
        """`vocab`: the tokenizer's view DRY's sequence breakers need (None: no breakers)."""
        self.vocab_size = vocab_size
        self.seed = turn_seed(seed)
        self._uniform = random.Random(self.seed)
        self._vocab = vocab
        self._chain: ExtendedChain | None = None
        self.set_params(params)

    def set_params(self, params: SamplingParams) -> None:
        """Use `params` from the next `choose` on."""
        self.params = params
        self.plan = make_plan(params, self.vocab_size)
        self._inv_temp = F32(1.0 / params.temperature if params.temperature > 0 else 0.0)
        self._penalties = make_numpy_penalties(params)
        self.extended = needs_extended(params)  # the MLX sampler's switch, so both run the same chain
        if self.extended and self._chain is None:
            self._chain = ExtendedChain(params, self.vocab_size, self.seed, self._vocab)
        elif self._chain is not None:
            self._chain.set_params(params)

    @property
    def uses_context(self) -> bool:
        """Whether `choose` reads its context (the penalties, DRY)."""
        if self.extended:
            assert self._chain is not None
            return self._chain.uses_context
        return self._penalties is not None

    def choose(self, logits: np.ndarray, context: np.ndarray | None) -> Draw:
        """The next token from one position's float32 logits (which may be llama.cpp's buffer:
        the draw keeps its own copy)."""
        u = F32(next_uniform(self._uniform))  # the MLX sampler's draw
        if self.extended:
            assert self._chain is not None
            chained = self._chain.choose(logits, context, float(u))
            return Draw(chained.token, chained.raw, self.plan, None, chained.weights,
                        F32(1) if chained.weights is None else chained.weights.sum(dtype=F32), False, 0)
        if self._penalties is not None:
            assert context is not None, "penalties need the context (see `uses_context`)"
            x = self._penalties(logits, context)
        else:
            x = np.array(logits, dtype=F32)
        plan = self.plan
        if plan.greedy:  # one argmax (the first maximum: the lowest id, as `shortlist` orders ties)
            return Draw(int(np.argmax(x)), x, plan, None, None, F32(1), False, 0)
        with np.errstate(invalid="ignore", divide="ignore"):  # NaN logits: the turn refuses the row
            return self._draw_shortlist(x, u, plan) if plan.top_k else self._draw_full(x, u, plan)

    def _draw_shortlist(self, x: np.ndarray, u: np.float32, plan: Plan) -> Draw:
        """Top-k is on: filter and draw among the short list (MLX's `_draw_shortlist`)."""
        ids = shortlist(x, plan.shortlist)
        x_list = x[ids]
        w = np.exp((x_list - x_list[0]) * self._inv_temp)
        reads_t1 = (plan.top_p and not plan.scaled_top_p) or (plan.min_p and not plan.scaled_min_p)
        unscaled = np.exp(x_list - x_list[0]) if reads_t1 else w
        keep = np.arange(w.shape[0]) < self.params.top_k
        if plan.top_p:
            v = w if plan.scaled_top_p else unscaled
            cum = np.cumsum(np.where(keep, v, F32(0)), dtype=F32)
            crossing = int(np.count_nonzero(cum < F32(self.params.top_p) * cum[-1]))
            keep &= v >= v[min(crossing, w.shape[0] - 1)]
        if plan.min_p:
            keep &= (w if plan.scaled_min_p else unscaled) >= F32(self.params.min_p)
        q = np.where(keep, w, F32(0))
        position = inverse_cdf(q, u)
        return Draw(int(ids[position]), x, plan, ids, q, q.sum(dtype=F32), True, position)

    def _draw_full(self, x: np.ndarray, u: np.float32, plan: Plan) -> Draw:
        """No top-k: filter and draw over the whole vocabulary, in id order (MLX's `_draw_full`)."""
        ids = shortlist(x, plan.shortlist) if plan.top_p else None  # else `statistics` makes it
        if not (plan.top_p or plan.min_p) or plan.scaled_top_p and plan.scaled_min_p:
            # one expression, so numpy reuses its temporaries (a named `x - max` cost ~0.3 ms at 32k: page faults)
            es = np.exp((x - x.max()) * self._inv_temp)  # p / p_max of the temperature-scaled distribution
            keep = self._keep(es, es, ids, plan)
            q = es if keep is None else np.where(keep, es, F32(0))
            return Draw(inverse_cdf(q, u), x, plan, ids, q, q.sum(dtype=F32), False, 0)
        xm = x - x.max()
        if not (plan.scaled_top_p or plan.scaled_min_p):  # the filters read temperature 1
            e = np.exp(xm)  # one exp over the vocabulary; the scaled one over the kept tokens only
            keep = self._keep(e, e, ids, plan)
            assert keep is not None  # a filter is on here: the filterless draw returned above
            kept = np.flatnonzero(keep)
            q = np.zeros_like(e)
            q[kept] = e[kept] if self._inv_temp == 1 else np.exp(xm[kept] * self._inv_temp)
        else:  # one filter on each side of the temperature
            e, es = np.exp(xm), np.exp(xm * self._inv_temp)
            keep = self._keep(es if plan.scaled_top_p else e, es if plan.scaled_min_p else e, ids, plan)
            assert keep is not None  # a filter is on here: the filterless draw returned above
            q = np.where(keep, es, F32(0))
        return Draw(inverse_cdf(q, u), x, plan, ids, q, q.sum(dtype=F32), False, 0)

    def _keep(self, top_source: np.ndarray, min_source: np.ndarray, ids: np.ndarray | None, plan: Plan) -> np.ndarray | None:
        """Which tokens top-p and min-p keep (None: both off), each reading its source (``p / p_max``
        scaled or at temperature 1, as the order says); one source: one threshold (MLX's `_draw_full`)."""
        if top_source is min_source:
            threshold: np.float32 | None = None
            if plan.top_p:
                assert ids is not None
                threshold = self._top_p_threshold(top_source, ids, plan)
            if plan.min_p:
                min_p = F32(self.params.min_p)
                threshold = min_p if threshold is None else max(threshold, min_p)
            return None if threshold is None else top_source >= threshold
        assert ids is not None
        return (top_source >= self._top_p_threshold(top_source, ids, plan)) & (min_source >= F32(self.params.min_p))

    def _top_p_threshold(self, es: np.ndarray, ids: np.ndarray, plan: Plan) -> np.float32:
        """The smallest relative weight top-p keeps, from the short list when its mass suffices,
        else from an exact full sort (MLX's `_top_p_threshold`)."""
        top_p = F32(self.params.top_p)
        w = es[ids]
        cheap_index = int(np.count_nonzero(np.cumsum(w, dtype=F32) < top_p * es.sum(dtype=F32)))
        if plan.shortlist >= plan.vocab or cheap_index < w.shape[0]:
            return F32(w[min(cheap_index, w.shape[0] - 1)])
        ascending = np.sort(es)
        tail_mass = np.cumsum(ascending[::-1], dtype=F32)[::-1]
        full_index = int(np.count_nonzero(tail_mass >= top_p * tail_mass[0])) - 1
        return F32(ascending[max(full_index, 0)])


def statistics(draw: Draw) -> list[float]:
    """The packed row `engine.local.sampling.LiveSampler.step` would give for this draw:
    [id, logprob, sampled_prob, rank, entropy, ids(N), logprobs(N), sampled(N)].

    A pure function of the draw (its plan included), so it may run on another thread while the
    sampler's parameters change for the next token.
    """
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # NaN in, NaN out: see `choose`
        return _statistics(draw)


def _statistics(draw: Draw) -> list[float]:
    """Only what the row holds, no whole-vocabulary array beyond the two the softmax needs
    (``x - max`` and its exponentials): the logprobs of the chosen token and the candidates are
    each ``(x - max) - log Z`` at their ids, and the rank needs the whole logprob row only when
    some raw logit is above the chosen token's (never for a greedy token). Measured at a 152k vocabulary:
    1.7 -> 0.6 ms a token, the statistics thread's time that shares the cores with llama.cpp."""
    x, plan, token = draw.logits, draw.plan, draw.token
    xm = x - x.max()
    e = np.exp(xm)
    z = e.sum(dtype=F32)
    log_z = np.log(z)
    if np.isfinite(xm.min()):  # no -inf (a ban, a bias): sum(e * xm) is one dot product
        weighted = F32(np.dot(e, xm))
    else:  # 0 * -inf is NaN: the banned tokens add nothing
        weighted = np.where(e > 0, e * xm, F32(0)).sum(dtype=F32)
    entropy = log_z - weighted / z
    n = plan.candidates
    ids = draw.ids if draw.ids is not None else (shortlist(x, plan.shortlist) if plan.shortlist else None)
    cand = ids[:n] if ids is not None else np.zeros((0,), dtype=np.int64)
    chosen_sp, cand_sp = _sampled(draw, cand)
    chosen = xm[token] - log_z
    above = int(np.count_nonzero(x > x[token]))  # 0 for a greedy token: no logprob row needed
    rank = (int(np.count_nonzero(xm - log_z > chosen)) if above else 0) + 1
    head = [float(token), float(chosen), chosen_sp, float(rank), float(entropy)]
    return head + cand.astype(F32).tolist() + (xm[cand] - log_z).tolist() + cand_sp


def _sampled(draw: Draw, cand: np.ndarray) -> tuple[float, list[float]]:
    """The chosen token's and the candidates' sampled probabilities."""
    q, total = draw.weights, draw.total
    if q is None:  # greedy: the chosen token had probability 1
        return 1.0, (cand == draw.token).astype(F32).tolist()
    if draw.on_shortlist:
        return float(q[draw.position] / total), (q[: cand.shape[0]] / total).tolist()
    return float(q[draw.token] / total), (q[cand] / total).tolist()

