"""The extended sampling chain: every stage, in the order the parameters name, on the host.

The classic chain (penalties, temperature, top-k, top-p, min-p, the draw) runs as one lazy MLX
graph (`engine.local.sampling`) or its numpy twin (`engine.gguf.sampler`), tuned per token. Once
a stage beyond it is on (logit bias, DRY, top-nσ, typical-p, XTC, dynamic temperature,
mirostat v2) or the order is one that graph cannot follow, both engines run this instead: numpy,
stage after stage (`engine.local.stages`), so the two engines agree exactly. DRY and mirostat
are sequential by nature (llama.cpp runs them on the CPU too); the cost is a copy of the logits
to the host and a few full-vocabulary passes per token, paid only while such a stage is on.

Order: logit bias first, then the stages as `SamplingParams.samplers` names them (penalties and
DRY, which shape the raw distribution, always lead), then the draw. With mirostat on (2) the
filters give way, as in llama.cpp: bias, penalties, DRY, temperature, mirostat v2.

Random numbers: the draw (and mirostat's) uses the token's one uniform number, as the classic
chain does; XTC's coin comes from a second generator seeded from the turn's seed, so switching
XTC on or off never shifts the draws.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.core.api import SamplingParams
from engine.local import stages
from engine.local.stages import F32, NEG_INF, make_numpy_penalties

XTC_SALT = 0x5854435F  # "XTC_": the XTC generator's seed is the turn's seed xor this


@dataclass(frozen=True)
class TokenVocab:
    """What DRY's sequence breakers need from the tokenizer: each id's bytes and a tokenizer
    for a breaker's tail (no special tokens)."""

    size: int
    token_bytes: Callable[[int], bytes]
    tokenize: Callable[[str], list[int]]


def dry_on(params: SamplingParams) -> bool:
    """DRY is in force (llama.cpp's own test: a multiplier, a base >= 1, a window)."""
    return params.dry_multiplier != 0.0 and params.dry_base >= 1.0 and params.dry_penalty_last_n != 0


def xtc_on(params: SamplingParams) -> bool:
    """XTC is in force (llama.cpp: a probability, and a threshold of at most 0.5)."""
    return params.xtc_probability > 0.0 and params.xtc_threshold <= 0.5


def penalties_on(params: SamplingParams) -> bool:
    return params.repetition_context_size != 0 and (
        params.repetition_penalty != 1.0 or params.presence_penalty != 0.0 or params.frequency_penalty != 0.0)


def needs_extended(params: SamplingParams) -> bool:
    """Whether this chain must run instead of the classic graph: a stage beyond the classic ones
    is on, or the order puts top-p before top-k (the graph filters top-k first)."""
    order = params.samplers
    return bool(params.logit_bias or dry_on(params) or params.top_n_sigma > 0.0 or params.typical_p < 1.0
                or xtc_on(params) or params.dynatemp_range > 0.0 or params.mirostat == 2
                or (params.temperature > 0.0 and 0 < params.top_k and params.top_p < 1.0
                    and order.index("top_p") < order.index("top_k")))


def context_window(params: SamplingParams) -> int | None:
    """How many of the latest ids the chain reads (0: none; None: all of them)."""
    windows = [params.repetition_context_size] if penalties_on(params) else []
    if dry_on(params) and needs_extended(params):
        if params.dry_penalty_last_n < 0:
            return None
        windows.append(params.dry_penalty_last_n)
    return max(windows, default=0)


def recent_ids(tokens: Sequence[int], params: SamplingParams) -> list[int]:
    """The tail of `tokens` the chain looks back over (`context_window`), as a list."""
    window = context_window(params)
    if window is None:
        return list(tokens)
    return list(tokens[-window:]) if window else []


@dataclass
class ChainDraw:
    """One token chosen by the chain, with what the statistics and the stage view need."""

    token: int
    raw: np.ndarray  # float32 logits after the modifiers (bias, penalties, DRY): the raw distribution
    weights: np.ndarray | None  # what the token was drawn from, over the vocabulary; None: greedy
    stages: list[tuple[str, np.ndarray]] = field(default_factory=list)  # (stage, logits after it), traced


class ExtendedChain:
    """One turn's extended chain: live parameters, mirostat's running mu, XTC's generator."""

    def __init__(self, params: SamplingParams, vocab_size: int, seed: int, vocab: TokenVocab | None = None) -> None:
        self.vocab_size = vocab_size
        self.vocab = vocab
        self._xtc = random.Random(seed ^ XTC_SALT)
        self._breakers: tuple[tuple[str, ...], dict[int, list[tuple[int, ...]]]] | None = None
        self.mu = 2.0 * params.mirostat_tau
        self.params = params
        self.set_params(params)

    def set_params(self, params: SamplingParams) -> None:
        """Use `params` from the next token on; mirostat starts again (mu = 2 tau) when tau changes."""
        if params.mirostat_tau != self.params.mirostat_tau:
            self.mu = 2.0 * params.mirostat_tau
        self.params = params
        self._penalties = make_numpy_penalties(params)

    def advance_coin(self) -> None:
        """Spend XTC's coin of a token that is not traced (the stage view's replay skips the
        positions it needs no numbers of, and must keep the coins where the turn had them)."""
        self._xtc.random()

    @property
    def uses_context(self) -> bool:
        """Whether `choose` reads the context (penalties or DRY on)."""
        return penalties_on(self.params) or dry_on(self.params)

    def breakers(self) -> dict[int, list[tuple[int, ...]]]:
        """DRY's processed sequence breakers, computed once per list (a pass over the vocabulary)."""
        wanted = self.params.dry_sequence_breakers
        if self._breakers is None or self._breakers[0] != wanted:
            table = {} if self.vocab is None else stages.dry_breakers(
                wanted, self.vocab.token_bytes, min(self.vocab.size, self.vocab_size), self.vocab.tokenize)
            self._breakers = (wanted, table)
        return self._breakers[1]

    def modifiers(self, logits: np.ndarray, context: Sequence[int] | np.ndarray | None,
                  trace: list[tuple[str, np.ndarray]] | None = None) -> np.ndarray:
        """Bias, then penalties and DRY in the chosen order: the raw distribution's logits."""
        p = self.params
        x = np.array(logits, dtype=F32).reshape(-1)
        if p.logit_bias:
            x = stages.logit_bias(x, p.logit_bias)
            _note(trace, "logit bias", x)
        ids = np.asarray(context if context is not None else (), dtype=np.int64).reshape(-1)
        for stage in p.samplers[:2]:
            if stage == "penalties" and self._penalties is not None and ids.size:
                x = self._penalties(x, ids)
                _note(trace, "penalties", x)
            elif stage == "dry" and dry_on(p):
                x = stages.dry(x, ids.tolist(), p.dry_multiplier, p.dry_base, p.dry_allowed_length,
                               p.dry_penalty_last_n, self.breakers())
                _note(trace, "DRY", x)
        return x

    def choose(self, logits: np.ndarray, context: Sequence[int] | np.ndarray | None, u: float,
               trace: bool = False) -> ChainDraw:
        """The next token from one position's logits and the token's uniform number `u`."""
        p = self.params
        steps: list[tuple[str, np.ndarray]] | None = [] if trace else None
        chance = self._xtc.random() if xtc_on(p) else 1.0  # one coin per token while XTC is on
        raw = self.modifiers(logits, context, steps)
        if not np.isfinite(raw).any() or np.isnan(raw).any() or np.isposinf(raw).any():
            return ChainDraw(int(np.argmax(raw)), raw, None, steps or [])  # not a distribution: the turn refuses it
        if p.temperature == 0.0 and p.mirostat != 2:  # greedy: the most likely raw token (lowest id on ties)
            token = int(np.argmax(raw))
            return ChainDraw(token, raw, None, steps or [])
        if p.mirostat == 2:
            x = stages.temperature(raw, p.temperature, 0.0, 1.0)
            _note(steps, "temperature", x)
            kept, token, self.mu = stages.mirostat_v2(x, p.mirostat_tau, p.mirostat_eta, self.mu, u)
            _note(steps, "mirostat", kept)
            return ChainDraw(token, raw, _weights(kept), steps or [])
        x = raw
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for stage in p.samplers[2:]:
                before = x
                x = self._stage(stage, x, chance)
                if x is not before:
                    _note(steps, _LABELS[stage], x)
        weights = _weights(x)
        return ChainDraw(stages.inverse_cdf(weights, F32(u)), raw, weights, steps or [])

    def _stage(self, stage: str, x: np.ndarray, chance: float) -> np.ndarray:
        """One filter (or the temperature); returns `x` itself when the stage is off."""
        p = self.params
        if stage == "top_n_sigma":
            return stages.top_n_sigma(x, p.top_n_sigma) if p.top_n_sigma > 0.0 else x
        if stage == "top_k":
            return stages.top_k(x, p.top_k) if p.top_k > 0 else x
        if stage == "typ_p":
            return stages.typical(x, p.typical_p) if p.typical_p < 1.0 else x
        if stage == "top_p":
            return stages.top_p(x, p.top_p) if p.top_p < 1.0 else x
        if stage == "min_p":
            return stages.min_p(x, p.min_p) if p.min_p > 0.0 else x
        if stage == "xtc":
            return stages.xtc(x, p.xtc_probability, p.xtc_threshold, chance) if xtc_on(p) else x
        if stage == "temperature":
            if p.temperature == 1.0 and p.dynatemp_range <= 0.0:
                return x
            return stages.temperature(x, p.temperature, p.dynatemp_range, p.dynatemp_exponent)
        raise ValueError(f"unknown stage {stage!r}")


_LABELS = {"top_n_sigma": "top-nσ", "top_k": "top-k", "typ_p": "typical-p", "top_p": "top-p",
           "min_p": "min-p", "xtc": "XTC", "temperature": "temperature"}


def _note(trace: list[tuple[str, np.ndarray]] | None, name: str, x: np.ndarray) -> None:
    if trace is not None:
        trace.append((name, x))


def _weights(x: np.ndarray) -> np.ndarray:
    """Unnormalised float32 probabilities of the candidates (0 for removed tokens)."""
    with np.errstate(invalid="ignore"):
        return np.where(x > NEG_INF, np.exp(x - x.max()), F32(0)).astype(F32)


def packed_row(draw: ChainDraw, candidates: int) -> list[float]:
    """The packed statistics row (`engine.local.sampling.LiveSampler.step`'s layout) for a draw:
    [id, logprob, sampled_prob, rank, entropy, ids(N), logprobs(N), sampled(N)]."""
    x, token = draw.raw, draw.token
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        xm = x - x.max()
        e = np.exp(xm)
        z = e.sum(dtype=F32)
        log_z = np.log(z)
        raw = xm - log_z
        entropy = log_z - np.where(e > 0, e * xm, F32(0)).sum(dtype=F32) / z
        n = min(candidates, x.shape[0])
        cand = stages.shortlist(x, n) if n else np.zeros((0,), dtype=np.int64)
        if draw.weights is None:
            chosen_sp, cand_sp = 1.0, (cand == token).astype(F32).tolist()
        else:
            total = draw.weights.sum(dtype=F32)
            chosen_sp, cand_sp = float(draw.weights[token] / total), (draw.weights[cand] / total).tolist()
    rank = int(np.count_nonzero(raw > raw[token])) + 1
    head = [float(token), float(raw[token]), chosen_sp, float(rank), float(entropy)]
    return head + cand.astype(F32).tolist() + raw[cand].tolist() + cand_sp
