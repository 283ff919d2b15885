"""The per-token sampling chain and the statistics the inspector shows, as one lazy MLX graph.

`LiveSampler.step` turns one position's logits into the next token plus a packed float32 row of
statistics (chosen token, its logprob, sampled probability, rank, entropy, top-N candidates). It
only *builds* the graph: the caller pipelines it with the next forward pass (``mx.async_eval``)
and reads the row with a single ``.tolist()``. All definitions follow `engine.core.api`.

Chain: penalties -> temperature -> top-k -> top-p -> min-p -> draw. How each filter decides:

- **top-k** keeps exactly the k most likely tokens (ties at the k-th place are broken by the
  deterministic order of the partial sort). ``top_k=0`` or ``>= vocab`` is off.
- **top-p** keeps every token at least as likely as the token whose cumulative probability (most
  likely first, over the temperature-scaled distribution after top-k, renormalised) first reaches
  ``top_p``; that crossing token is kept, and so are tokens exactly tied with it.
- **min-p** keeps tokens with ``p >= min_p * p_max``, relative to the most likely token. The most
  likely token survives every filter, so this equals min-p on the renormalised output of top-p.
- the draw is an inverse-CDF draw from one uniform number, made on the host by a generator seeded
  per turn and passed in as an array: cheap (MLX's key split and uniform would add graph nodes
  to every token), and the same seed with the same parameters reproduces the same tokens.

Why it is fast (this runs once per token): a full-vocabulary sort is the most expensive thing a
token could do on a CPU at a large vocabulary. Instead the top ``M`` tokens are selected with
``argpartition`` and only they are sorted. With top-k on, ``M >= k`` covers every kept token, so
the whole filter-and-draw works on ``M`` values. Without top-k, top-p reads its threshold off the
top ``M`` whenever their mass reaches ``top_p`` (nearly always) and otherwise off an exact full
sort. MLX has no lazy branch, so the full sort is always in the graph, but it sorts an all-zero
array when the short list was enough, which is several times cheaper than sorting real values.
Every switched-off filter is left out of the graph. On a GPU the core is traced by `mx.compile`
once per *structure* (greedy or not, which filters are on, N, the size bucket of M): parameter
values are array inputs, so changing them never recompiles. On a CPU only small elementwise
kernels shared by every plan are compiled (the exponential, the entropy terms; see
`_compile_by_default`).

On a CPU the other cost is the graph itself: the engine thread spends microseconds handing each
MLX node to the stream thread, which computes meanwhile, so for small models a token costs about
its node count. Hence scalars are (1,) arrays (0-d ones add squeeze/expand/broadcast nodes),
gathers are single `take_along_axis` nodes, and up to `SMALL_VOCAB` tokens the vocabulary is
sorted whole (no short list, no fallback) with `mx.exp`, which roughly halves a small
vocabulary's node count (the numbers: docs/benchmarks-history.md).
"""

from __future__ import annotations

import functools
import math
import os
import random
from dataclasses import dataclass
from typing import Callable, NamedTuple

import mlx.core as mx
import numpy as np

from engine.core.api import SamplingParams
from engine.local.chain import ExtendedChain, TokenVocab, needs_extended, packed_row
from engine.local.penalties import make_penalties

# Short-list size for top-p without top-k: the share of steps needing the full sort shrinks with it.
TOP_P_SHORTLIST = 1024
# Up to this vocabulary top-p sorts the whole vocabulary (no short list, no fallback) and `mx.exp`
# replaces the compiled `exp`: on a CPU, building a step's graph costs microseconds per MLX node while
# the stream thread computes in parallel, so for small vocabularies fewer nodes beat less compute.
SMALL_VOCAB = 8192
HEADER = 5  # chosen_id, chosen_logprob, chosen_sampled_prob, rank, entropy


@dataclass(frozen=True)
class TokenStats:
    """One token's statistics as plain Python numbers (the engine adds the text)."""

    id: int
    logprob: float
    sampled_prob: float
    rank: int
    entropy: float
    candidates: tuple[tuple[int, float, float], ...]  # (id, logprob, sampled_prob), best first


class Plan(NamedTuple):
    """The structural choices for one set of parameters; one compiled trace per distinct plan."""

    greedy: bool
    top_k: bool  # filter and draw on the short list (which then holds every kept token)
    top_p: bool
    min_p: bool
    candidates: int
    shortlist: int  # M: how many best tokens are partially sorted; 0 = none needed
    vocab: int
    scaled_top_p: bool = True  # top-p reads the temperature-scaled distribution (temperature comes first)
    scaled_min_p: bool = True  # min-p likewise


Exp = Callable[[mx.array], mx.array]


def logits_were_numbers(row: list[float]) -> bool:
    """Whether the logits behind a packed row were a distribution (no NaN, no +inf).

    Checked on the row the turn reads back anyway, so it costs no device work: a NaN or +inf
    logit makes the maximum or the normaliser NaN, and with it the chosen token's logprob and the
    entropy (the header's floats); a -inf logit (a token made impossible) leaves them finite.
    """
    return all(math.isfinite(value) for value in row[1:HEADER])


def _exp_for(plan: "Plan", exp: Exp) -> Exp:
    """The exp to use: one MLX node for small vocabularies, else the sampler's `exp`.

    Every exponent in this module is a logit minus the maximum, so <= 0. On a CPU the engine
    passes the speed layer's `exp_nonpositive` (MLX's CPU `exp` is scalar code, the largest cost
    of a token at a large vocabulary; that compiled one is several times faster, accurate to
    ~3e-7 relative, and its kernels are shared by every plan); elsewhere it is MLX's own `exp`.
    """
    return mx.exp if plan.vocab <= SMALL_VOCAB else exp


def _bucket(n: int) -> int:
    """The power of two >= n, so top-k values inside one bucket share a trace."""
    return 1 << max(0, n - 1).bit_length()


def make_plan(params: SamplingParams, vocab: int) -> Plan:
    """Decide which parts of the chain this step's graph needs."""
    greedy = params.temperature == 0.0
    top_k = not greedy and 0 < params.top_k < vocab
    top_p = not greedy and params.top_p < 1.0
    min_p = not greedy and params.min_p > 0.0
    n = min(params.candidates, vocab)
    need = n
    if top_k:
        need = max(need, _bucket(params.top_k))
    elif top_p:
        need = max(need, TOP_P_SHORTLIST if vocab > SMALL_VOCAB else vocab)
    order = params.samplers
    scaled_top_p = order.index("temperature") < order.index("top_p")
    scaled_min_p = order.index("temperature") < order.index("min_p")
    if not top_p:  # a filter that is off follows the other, so one threshold serves (fewer nodes)
        scaled_top_p = scaled_min_p
    elif not min_p:
        scaled_min_p = scaled_top_p
    return Plan(greedy, top_k, top_p, min_p, n, min(need, vocab), vocab, scaled_top_p, scaled_min_p)


def _shortlist(raw: mx.array, size: int) -> mx.array:
    """Ids of the `size` best tokens, best first, sorting only those `size` values."""
    vocab = raw.shape[0]
    if size >= vocab:
        return mx.argsort(-raw)
    ids = mx.argpartition(raw, kth=vocab - size)[vocab - size :]  # the best `size`, unordered
    return _at(ids, mx.argsort(-_at(raw, ids)))


def _at(values: mx.array, index: mx.array) -> mx.array:
    """``values[index]`` for 1-D arrays as one gather node (indexing adds a squeeze node)."""
    return mx.take_along_axis(values, index, axis=0)


# Scalars inside the graph are (1,)-shaped: slices (`a[-1:]`) and `keepdims` reductions keep them
# so, and a (1,) index gathers a (1,) value. Each MLX op has a fixed cost on a CPU, and
# 0-d scalars would add a squeeze or expand node around most of them.


def _inverse_cdf(weights: mx.array, u: mx.array) -> mx.array:
    """Index (1,) drawn with probability weights/sum(weights) from one uniform u in [0, 1).

    The first index whose cumulative weight exceeds ``u * total`` always has a positive weight,
    so a removed token can never be drawn.
    """
    cdf = mx.cumsum(weights)
    index = mx.sum(cdf <= u * cdf[-1:], keepdims=True)
    return mx.minimum(index, weights.shape[0] - 1)


def _top_p_threshold(es: mx.array, ids: mx.array, top_p: mx.array, plan: Plan) -> mx.array:
    """The smallest relative weight (1,) top-p keeps, from the short list when its mass suffices.

    `es` holds ``p / p_max`` of the temperature-scaled distribution for the whole vocabulary.
    """
    w = _at(es, ids)
    target = top_p * mx.sum(es, keepdims=True)
    cheap_index = mx.sum(mx.cumsum(w) < target, keepdims=True)
    cheap = _at(w, mx.minimum(cheap_index, w.shape[0] - 1))
    if plan.shortlist >= plan.vocab:
        return cheap
    enough = cheap_index < w.shape[0]
    ascending = mx.sort(mx.where(enough, 0.0, es))  # all zeros (cheap) when the list sufficed
    tail_mass = mx.cumsum(ascending, reverse=True)
    full_index = mx.sum(tail_mass >= top_p * tail_mass[:1], keepdims=True) - 1
    return mx.where(enough, cheap, _at(ascending, mx.maximum(full_index, 0)))


def _draw_shortlist(
    x_list: mx.array, u: mx.array, inv_temp: mx.array, top_k: mx.array, top_p: mx.array,
    min_p: mx.array, plan: Plan, exp: Exp,
) -> tuple[mx.array, mx.array]:
    """Top-k is on: filter and draw among the short list. Returns (position (1,), sampled probs).

    Top-p and min-p read the distribution at temperature 1 when the order puts the temperature
    after them (`Plan.scaled_top_p`); temperature is monotone, so only their thresholds move."""
    w = _exp_for(plan, exp)((x_list - x_list[:1]) * inv_temp)  # p / p_max, best first
    reads_t1 = (plan.top_p and not plan.scaled_top_p) or (plan.min_p and not plan.scaled_min_p)
    unscaled = _exp_for(plan, exp)(x_list - x_list[:1]) if reads_t1 else w
    keep = mx.arange(w.shape[0]) < top_k
    if plan.top_p:
        v = w if plan.scaled_top_p else unscaled
        cum = mx.cumsum(mx.where(keep, v, 0.0))
        crossing = mx.sum(cum < top_p * cum[-1:], keepdims=True)
        keep = keep & (v >= _at(v, mx.minimum(crossing, w.shape[0] - 1)))
    if plan.min_p:
        keep = keep & ((w if plan.scaled_min_p else unscaled) >= min_p)
    q = mx.where(keep, w, 0.0)
    return _inverse_cdf(q, u), q / mx.sum(q, keepdims=True)


def _draw_full(
    xm: mx.array, e: mx.array, u: mx.array, ids: mx.array | None, inv_temp: mx.array, top_p: mx.array,
    min_p: mx.array, plan: Plan, exp: Exp,
) -> tuple[mx.array, mx.array]:
    """No top-k: filter and draw over the whole vocabulary. Returns (token id (1,), sampled probs).

    `e` is ``p / p_max`` at temperature 1: what top-p and min-p read when the order puts the
    temperature after them. With both on the same side one threshold serves both, as before."""
    es = _exp_for(plan, exp)(xm * inv_temp)  # p / p_max of the temperature-scaled distribution
    if plan.scaled_top_p == plan.scaled_min_p:
        source = es if plan.scaled_top_p else e
        threshold = None
        if plan.top_p:
            assert ids is not None
            threshold = _top_p_threshold(source, ids, top_p, plan)
        if plan.min_p:
            threshold = min_p if threshold is None else mx.maximum(threshold, min_p)
        q = es if threshold is None else mx.where(source >= threshold, es, 0.0)
    else:
        keep = None
        if plan.top_p:
            assert ids is not None
            source = es if plan.scaled_top_p else e
            keep = source >= _top_p_threshold(source, ids, top_p, plan)
        if plan.min_p:
            kept = (es if plan.scaled_min_p else e) >= min_p
            keep = kept if keep is None else keep & kept
        q = es if keep is None else mx.where(keep, es, 0.0)
    return _inverse_cdf(q, u), q / mx.sum(q, keepdims=True)


def _plogp(e: mx.array, xm: mx.array) -> mx.array:
    """Terms of the entropy sum, e * (x - max); a token with probability 0 contributes 0 (not NaN)."""
    return mx.where(e > 0, e * xm, 0.0)


_plogp_fused = mx.compile(_plogp)  # one elementwise kernel instead of four nodes


def build_graph(
    x: mx.array, u: mx.array, inv_temp: mx.array, top_k: mx.array, top_p: mx.array,
    min_p: mx.array, plan: Plan, exp: Exp = mx.exp,
) -> tuple[mx.array, mx.array]:
    """The core graph for float32 (vocab,) logits after penalties -> (token (1,), packed row).

    `u` and the parameters are (1,) arrays; `exp` serves exponents <= 0 (see `_exp_for`).
    """
    m = mx.max(x, keepdims=True)
    xm = x - m
    e = _exp_for(plan, exp)(xm)
    z = mx.sum(e, keepdims=True)
    log_z = mx.log(z)
    raw = xm - log_z
    entropy = log_z - mx.sum(_plogp_fused(e, xm), keepdims=True) / z
    ids = _shortlist(raw, plan.shortlist) if plan.shortlist else None
    cand = ids[: plan.candidates] if ids is not None else mx.zeros((0,), dtype=mx.uint32)
    if plan.greedy:
        token = mx.argmax(x, keepdims=True)
        chosen_sp = mx.ones((1,), dtype=mx.float32)
        cand_sp = (cand == token).astype(mx.float32)
    elif plan.top_k:
        assert ids is not None
        pos, probs = _draw_shortlist(_at(x, ids), u, inv_temp, top_k, top_p, min_p, plan, exp)
        token, chosen_sp, cand_sp = _at(ids, pos), _at(probs, pos), probs[: plan.candidates]
    else:
        token, probs = _draw_full(xm, e, u, ids, inv_temp, top_p, min_p, plan, exp)
        chosen_sp, cand_sp = _at(probs, token), _at(probs, cand)
    chosen = _at(raw, token)
    rank = mx.sum(raw > chosen, keepdims=True) + 1
    packed = mx.concatenate([token.astype(mx.float32), chosen, chosen_sp, rank.astype(mx.float32), entropy,
                             cand.astype(mx.float32), _at(raw, cand), cand_sp])
    return token.astype(mx.int32), packed


def _core(
    x: mx.array, u: mx.array, inv_temp: mx.array, top_k: mx.array, top_p: mx.array,
    min_p: mx.array, *, plan: Plan, exp: Exp = mx.exp,
) -> tuple[mx.array, mx.array]:
    """Indirection so `build_graph` is looked up at trace time (tests count traces through it)."""
    return build_graph(x, u, inv_temp, top_k, top_p, min_p, plan, exp)


@functools.lru_cache(maxsize=4)
def _compiled_core(exp: Exp) -> Callable[..., tuple[mx.array, mx.array]]:
    """`_core` traced with `mx.compile`, one per exponential (a compiled function takes only arrays
    and constants, so `exp` is bound here); cached so every sampler shares the traces."""
    return mx.compile(functools.partial(_core, exp=exp))


def _compile_by_default() -> bool:
    """Compile the whole core on a GPU only.

    On a GPU the trace is built in milliseconds and fusing saves dozens of kernel launches per
    token. MLX's CPU backend instead builds each fused kernel with a C++ compiler (several per
    plan, cached under the temp dir): a first token or a toggled filter would stall for seconds
    to save a fraction of a millisecond per token, so there only small shared elementwise kernels
    are compiled.
    """
    return mx.default_device().type == mx.DeviceType.gpu


def turn_seed(seed: int | None) -> int:
    """The seed a turn draws with: the caller's, else a fresh random one (reported back, so the
    turn can be reproduced)."""
    return seed if seed is not None else int.from_bytes(os.urandom(8), "little") >> 1


def next_uniform(rng: random.Random) -> float:
    """The token's one uniform number in [0, 1): 24 random bits, so it is exact in float32. Every
    sampler draws it this way, once per token (the GGUF engine's numpy twin too)."""
    return rng.getrandbits(24) / (1 << 24)


class LiveSampler:
    """Per-turn sampling state on the engine thread. Parameters are live: `set_params` swaps the
    values used from the next step on, held as mx.array scalars so nothing is recompiled per value.
    """

    def __init__(
        self, vocab_size: int, params: SamplingParams, seed: int | None, *, compiled: bool | None = None,
        exp: Callable[[mx.array], mx.array] = mx.exp, vocab: TokenVocab | None = None,
    ) -> None:
        """`compiled`: trace the core with `mx.compile` (None: see `_compile_by_default`); `exp`:
        the exponential for non-positive exponents (the CPU speed layer passes a faster one);
        `vocab`: the tokenizer's view DRY's sequence breakers need (None: no breakers)."""
        self.vocab_size = vocab_size
        use_compile = _compile_by_default() if compiled is None else compiled
        self._core = _compiled_core(exp) if use_compile else functools.partial(_core, exp=exp)
        self.seed = turn_seed(seed)
        self._uniform = random.Random(self.seed)
        self._vocab = vocab
        self._chain: ExtendedChain | None = None  # made when a stage beyond the classic graph is first on
        self.set_params(params)

    def set_params(self, params: SamplingParams) -> None:
        """Use `params` from the next `step` on."""
        self.params = params
        self.plan = make_plan(params, self.vocab_size)
        temperature = params.temperature
        self._inv_temp = mx.array([1.0 / temperature if temperature > 0 else 0.0], dtype=mx.float32)
        self._top_k = mx.array([params.top_k], dtype=mx.int32)
        self._top_p = mx.array([params.top_p], dtype=mx.float32)
        self._min_p = mx.array([params.min_p], dtype=mx.float32)
        self._penalties = make_penalties(params)
        self.extended = needs_extended(params)
        if self.extended and self._chain is None:
            self._chain = ExtendedChain(params, self.vocab_size, self.seed, self._vocab)
        elif self._chain is not None:
            self._chain.set_params(params)  # kept while off too: mirostat's mu lives on

    @property
    def uses_context(self) -> bool:
        """Whether `step` reads `context` (the penalties, DRY), so callers can skip building it."""
        if self.extended:
            assert self._chain is not None
            return self._chain.uses_context
        return self._penalties is not None

    def step(self, logits: mx.array, context: mx.array | None) -> tuple[mx.array, mx.array]:
        """Build (token int32 (1,), packed float32 row) for one position; evaluates nothing.

        `context` holds every token id fed to the model so far (penalties read its window); None
        when no penalty is on (`uses_context`).
        Row layout: [id, logprob, sampled_prob, rank, entropy, ids(N), logprobs(N), sampled(N)],
        N = min(candidates, vocab).
        """
        if self.extended:
            return self._extended_step(logits, context)
        x = logits.astype(mx.float32).reshape(-1)
        if self._penalties is not None:
            assert context is not None, "penalties need the context (see `uses_context`)"
            x = self._penalties(x, context)
        u = mx.array([next_uniform(self._uniform)], dtype=mx.float32)
        return self._core(
            x, u, self._inv_temp, self._top_k, self._top_p, self._min_p, plan=self.plan
        )

    def _extended_step(self, logits: mx.array, context: mx.array | None) -> tuple[mx.array, mx.array]:
        """The extended chain (`engine.local.chain`) on the host: the logits are read back now
        (no pipelining while such a stage is on), the token and the row go back as arrays."""
        assert self._chain is not None
        x = np.array(logits.astype(mx.float32).reshape(-1))
        ids = None if context is None else np.array(context).reshape(-1)
        draw = self._chain.choose(x, ids, next_uniform(self._uniform))
        row = packed_row(draw, self.params.candidates)
        return mx.array([draw.token], dtype=mx.int32), mx.array(row, dtype=mx.float32)

    @staticmethod
    def unpack(row: list[float], n_candidates: int) -> TokenStats:
        """Plain statistics from one packed row.

        `n_candidates` is what the parameters asked for; a vocabulary smaller than that yields
        fewer, so the count is read off the row's length and only checked against it.
        """
        n, extra = divmod(len(row) - HEADER, 3)
        if extra or not 0 <= n <= n_candidates:
            raise ValueError(f"packed row of length {len(row)} does not hold {n_candidates} candidates")
        ids, lps, sps = row[HEADER : HEADER + n], row[HEADER + n : HEADER + 2 * n], row[HEADER + 2 * n :]
        candidates = tuple((int(i), float(lp), float(sp)) for i, lp, sp in zip(ids, lps, sps))
        return TokenStats(
            id=int(row[0]), logprob=float(row[1]), sampled_prob=float(row[2]),
            rank=int(row[3]), entropy=float(row[4]), candidates=candidates,
        )
