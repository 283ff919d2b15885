"""The sampling stages one by one, in numpy, each following llama.cpp's definition
(``src/llama-sampling.cpp``) unless it is one of logitscope's own (top-k, top-p, min-p, the draw:
see `engine.local.sampling`).

Every stage maps float32 logits over the whole vocabulary to new ones; a token a stage removes
gets ``-inf``, so the probabilities after any stage are ``softmax`` of what it returns (what the
stage view shows). llama.cpp works on a shrinking array instead; where that makes a difference,
the tokens at ``-inf`` count as gone:

- top-nσ leaves the tokens it removes in llama.cpp's array at ``-inf``, where a later typical-p
  reads ``0 * log 0`` (NaN) and dynamic temperature counts them in its maximum entropy; here they
  are simply not candidates any more.
- ties: llama.cpp sorts with ``std::sort`` (no order among equal values); here the lower id
  comes first, so a cut through equal values is reproducible.

Pure numpy, no MLX: the GGUF engine's twin and the MLX engine's extended chain both run this
code, so the two engines agree exactly whenever a stage beyond the classic ones is on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from engine.core.api import SamplingParams
from engine.core.params import BAN
from engine.local.topn import top_ids

F32 = np.float32
NEG_INF = F32(-np.inf)


def finite_count(x: np.ndarray) -> int:
    """How many tokens are still candidates."""
    return int(np.count_nonzero(x > NEG_INF))


def by_logit(x: np.ndarray) -> np.ndarray:
    """Ids of the candidates, best first (ties: lower id first)."""
    ids = np.flatnonzero(x > NEG_INF)
    return ids[np.argsort(-x[ids], kind="stable")]


def softmax_sorted(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids best first, their probabilities) as llama.cpp's ``softmax_impl``: float32 ``expf``,
    a float32 running sum (a cumulative sum adds in the same order), then each divided by it."""
    ids = by_logit(x)
    e = np.exp(x[ids] - x[ids[0]]).astype(F32)
    return ids, (e / np.cumsum(e, dtype=F32)[-1]).astype(F32)


def running_entropy(probs: np.ndarray) -> np.float32:
    """``-sum p log p`` over p > 0, added one by one in float32 as llama.cpp's loops do."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(probs > 0, probs * np.log(probs), F32(0)).astype(F32)
    return F32(-np.cumsum(terms, dtype=F32)[-1]) if terms.shape[0] else F32(0)


def shortlist(x: np.ndarray, size: int) -> np.ndarray:
    """Ids of the `size` largest values of `x`, largest first (ties: lower id first)."""
    return top_ids(x, size)


def keep_only(x: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """`x` with every token but `kept` at -inf."""
    out = np.full_like(x, NEG_INF)
    out[kept] = x[kept]
    return out


# --- logit modifiers (they shape the raw distribution)


class NumpyPenalties:
    """Repetition, presence and frequency penalties over the context window: the numpy twin of
    `engine.local.penalties` (the GGUF engine's, and every engine's extended chain)."""

    def __init__(self, params: SamplingParams) -> None:
        self.window = params.repetition_context_size
        self.repetition = F32(params.repetition_penalty)
        self.presence = F32(params.presence_penalty)
        self.frequency = F32(params.frequency_penalty)
        self.on = (params.repetition_penalty != 1.0, params.presence_penalty != 0.0,
                   params.frequency_penalty != 0.0)

    def __call__(self, logits: np.ndarray, context: np.ndarray) -> np.ndarray:
        """Penalised float32 logits (a new array); `context` holds ids, newest last."""
        if context.size == 0:
            return logits.copy()
        vocab = logits.shape[0]
        ids = context[-self.window:].astype(np.int64)
        ids = ids[(ids >= 0) & (ids < vocab)]  # out-of-vocabulary ids are dropped, as in MLX's spill slot
        counts = np.bincount(ids, minlength=vocab).astype(F32)
        seen = counts > 0
        repetition, presence, frequency = self.on
        if repetition:
            scaled = np.where(logits < 0, logits * self.repetition, logits / self.repetition)
            logits = np.where(seen, scaled, logits)
        if presence:
            logits = logits - self.presence * seen.astype(F32)
        if frequency:
            logits = logits - self.frequency * counts
        return logits  # a new array: at least one penalty is on (`make_numpy_penalties`)


def make_numpy_penalties(params: SamplingParams) -> NumpyPenalties | None:
    """The penalty step for these parameters, or None when every penalty is off (as `make_penalties`)."""
    if params.repetition_context_size == 0 or not (
        params.repetition_penalty != 1.0 or params.presence_penalty != 0.0 or params.frequency_penalty != 0.0
    ):
        return None
    return NumpyPenalties(params)




def logit_bias(x: np.ndarray, bias: Iterable[tuple[int, float]]) -> np.ndarray:
    """llama.cpp's ``logit_bias``: each listed token's logit plus its bias (float32 add); a ban
    sets -inf. Ids outside the vocabulary are ignored, as llama.cpp finds no such candidate."""
    out = x.copy()
    for token, value in bias:
        if 0 <= token < out.shape[0]:
            out[token] = NEG_INF if value <= BAN else F32(out[token] + F32(value))
    return out


def dry_breakers(breakers: Sequence[str], token_bytes: Callable[[int], bytes], vocab_size: int,
                 tokenize: Callable[[str], list[int]]) -> dict[int, list[tuple[int, ...]]]:
    """llama.cpp's ``get_overlapping_token_sequences`` for every breaker: head token -> tails.

    A token whose text contains a breaker is a breaker by itself (an empty tail); a token whose
    text ends with the start of a breaker heads a restart sequence whose tail is the rest of the
    breaker, tokenized (at most 20 tokens). Breakers are cut to 40 bytes, as llama.cpp does.
    """
    out: dict[int, list[tuple[int, ...]]] = {}
    pieces = [token_bytes(i) for i in range(vocab_size)]
    for breaker in breakers:
        text = breaker.encode("utf-8")[:40]
        if not text:
            continue
        for token, word in enumerate(pieces):
            tails = out.setdefault(token, [])
            if text in word:
                if () not in tails:
                    tails.append(())
                continue
            pos = word.find(text[:1])
            while pos != -1:
                i = 1
                match = True
                while i < len(text) and i + pos < len(word):
                    if word[pos + i] != text[i]:
                        match = False
                        break
                    i += 1
                if match:
                    tail = tuple(tokenize(text[i:].decode("utf-8", "replace")))[:20]
                    if tail not in tails:
                        tails.append(tail)
                pos = word.find(text[:1], pos + 1)
        for token in [t for t, tails in out.items() if not tails]:
            del out[token]
    return out


def dry(x: np.ndarray, context: Sequence[int], multiplier: float, base: float, allowed: int, last_n: int,
        breakers: Mapping[int, Sequence[tuple[int, ...]]]) -> np.ndarray:
    """llama.cpp's DRY ("don't repeat yourself"), step for step: a token that would extend a
    sequence already seen in the last `last_n` ids (-1: all of `context`) by more than `allowed`
    tokens loses ``multiplier * base ** (length - allowed)``; a breaker resets the lengths."""
    if multiplier == 0.0 or base < 1.0 or last_n == 0:
        return x
    tokens = list(context) if last_n < 0 else list(context[-last_n:]) if len(context) > last_n else list(context)
    n = len(tokens)
    if n <= allowed:
        return x

    def rat(i: int) -> int:
        return tokens[n - 1 - i]

    rep_limit = n
    for i in range(n):
        tails = breakers.get(rat(i))
        if not tails:
            continue
        longest = -1
        for tail in tails:
            length = len(tail)
            if length > longest and length <= i and all(tail[o] == rat(i - o - 1) for o in range(length)):
                longest = length
        if longest >= 0:
            rep_limit = i - longest
            break
    if rep_limit < allowed:
        return x
    repeat = [0] * n
    last, lt, rt = n - 1, 0, 0
    for k in range(1, n):
        if k > rt:
            m = 0
            while m + k < n and rat(m) == rat(m + k):
                m += 1
            repeat[last - k] = min(m, rep_limit)
            if m > 0:
                lt, rt = k, k + m - 1
        else:
            p = k - lt
            right = rt - k + 1
            if repeat[last - p] < right:
                repeat[last - k] = min(repeat[last - p], rep_limit)
            else:
                i = rt + 1
                while i < n and rat(i) == rat(i - k):
                    i += 1
                repeat[last - k] = min(i - k, rep_limit)
                lt, rt = k, i - 1
    longest_at: dict[int, int] = {}
    for i in range(n - 1):
        length = repeat[i]
        if length >= allowed:
            token = rat(n - 2 - i)
            if longest_at.get(token, -1) < length:
                longest_at[token] = length
    max_exponent = int(F32(88.7228391) / F32(math.log(base))) if base > 1.000001 else 0
    out = x.copy()
    for token, length in longest_at.items():
        if not 0 <= token < out.shape[0] or () in breakers.get(token, ()):
            continue
        exponent = length - allowed
        if max_exponent > 0 and exponent > max_exponent:
            exponent = max_exponent
        out[token] = F32(out[token] - F32(F32(multiplier) * F32(math.pow(F32(base), exponent))))
    return out


# --- filters


def top_n_sigma(x: np.ndarray, n: float) -> np.ndarray:
    """llama.cpp's top-nσ: keep tokens within ``n`` standard deviations of the best logit (mean
    and deviation over the candidates)."""
    live = x[x > NEG_INF]
    if n <= 0.0 or live.shape[0] <= 1:
        return x
    mean = F32(live.sum(dtype=F32) / F32(live.shape[0]))
    std = F32(math.sqrt(float(np.square(live.astype(np.float64) - float(mean)).sum()) / live.shape[0]))
    return np.where(x < F32(live.max() - F32(n) * std), NEG_INF, x).astype(F32)


def top_k(x: np.ndarray, k: int) -> np.ndarray:
    """Keep the k best tokens (ties: lower id first); 0 or more than the candidates is off."""
    if k <= 0 or k >= finite_count(x):
        return x
    return keep_only(x, by_logit(x)[:k])


def typical(x: np.ndarray, p: float) -> np.ndarray:
    """llama.cpp's locally typical sampling: keep the tokens whose surprise is closest to the
    entropy until their probability mass exceeds `p`."""
    if p >= 1.0 or finite_count(x) == 0:
        return x
    ids, probs = softmax_sorted(x)
    entropy = running_entropy(probs)
    with np.errstate(divide="ignore", invalid="ignore"):
        shifted = np.abs(-np.log(probs) - entropy).astype(F32)
    order = np.argsort(shifted, kind="stable")
    cum = np.cumsum(probs[order], dtype=F32)
    over = np.flatnonzero(cum > F32(p))
    last = int(over[0]) + 1 if over.shape[0] else order.shape[0]
    return keep_only(x, ids[order[:last]])


def top_p(x: np.ndarray, p: float) -> np.ndarray:
    """logitscope's top-p (see `engine.local.sampling`): keep every token at least as likely as
    the one whose cumulative probability first reaches `p` (ties with it kept). The best 1,024
    are sorted first, the whole vocabulary only when they hold less than `p` of the mass."""
    if p >= 1.0 or finite_count(x) == 0:
        return x
    top = x.max()
    total = np.exp(x - top).sum(dtype=F32)
    for size in (1024, x.shape[0]):
        ids = shortlist(x, min(size, x.shape[0]))
        ids = ids[x[ids] > NEG_INF]
        w = np.exp(x[ids] - top).astype(F32)
        crossing = int(np.count_nonzero(np.cumsum(w, dtype=F32) < F32(p) * total))
        if crossing < w.shape[0] or size >= x.shape[0]:
            threshold = w[min(crossing, w.shape[0] - 1)]
            return np.where(np.exp(x - top) >= threshold, x, NEG_INF).astype(F32)
    raise AssertionError("unreachable")


def min_p(x: np.ndarray, p: float) -> np.ndarray:
    """Keep tokens with probability at least `p` times the best one's."""
    if p <= 0.0 or finite_count(x) == 0:
        return x
    e = np.exp(x - x.max())
    return np.where(e >= F32(p), x, NEG_INF).astype(F32)


def xtc(x: np.ndarray, probability: float, threshold: float, chance: float) -> np.ndarray:
    """llama.cpp's XTC ("exclude top choices"): with probability `probability` (`chance` is this
    token's uniform number), remove every token at least `threshold` likely except the least
    likely of them. Only those few are sorted."""
    if probability <= 0.0 or threshold > 0.5 or finite_count(x) < 2 or chance > probability:
        return x
    with np.errstate(invalid="ignore"):
        e = np.where(x > NEG_INF, np.exp(x - x.max()), F32(0)).astype(F32)
    probs = e / np.cumsum(e, dtype=F32)[-1]
    above = np.flatnonzero(probs >= F32(threshold))
    if above.shape[0] <= 1:
        return x
    ranked = above[np.argsort(-x[above], kind="stable")]
    out = x.copy()
    out[ranked[:-1]] = NEG_INF  # all but the least likely of them
    return out


def temperature(x: np.ndarray, temp: float, spread: float, exponent: float) -> np.ndarray:
    """llama.cpp's ``temp_ext``: the logits over `temp`, or with `spread` > 0 (dynamic
    temperature) over ``temp - spread + 2 * spread * (H / H_max) ** exponent`` (at least 0), H
    the entropy of the candidates and H_max that of as many equal ones. A temperature of 0 keeps
    only the best token."""
    if spread > 0.0:
        count = finite_count(x)
        if count <= 1:
            return x
        low, high = max(F32(0), F32(temp) - F32(spread)), F32(temp) + F32(spread)
        _ids, probs = softmax_sorted(x)
        normalized = F32(running_entropy(probs) / -np.log(F32(1) / F32(count)))
        temp = float(F32(low + (high - low) * np.power(normalized, F32(exponent))))
    if temp <= 0.0:
        return keep_only(x, by_logit(x)[:1])
    return (x / F32(temp)).astype(F32)


# --- what picks the token


def mirostat_v2(x: np.ndarray, tau: float, eta: float, mu: float, u: float) -> tuple[np.ndarray, int, float]:
    """llama.cpp's mirostat v2: keep the best tokens while their surprise (-log2 p) is at most
    `mu` (at least one), draw among them with the uniform `u` as ``std::discrete_distribution``
    does (the first whose cumulative probability reaches `u`), then move `mu` towards `tau`.
    Returns (the kept logits, the token, the new mu)."""
    ids, probs = softmax_sorted(x)
    with np.errstate(divide="ignore"):
        surprise = -np.log2(probs)
    over = np.flatnonzero(surprise > F32(mu))
    size = max(1, int(over[0]) if over.shape[0] else ids.shape[0])
    kept = keep_only(x, ids[:size])
    ids, probs = softmax_sorted(kept)
    index = 0
    if probs.shape[0] > 1:
        cp = np.cumsum(probs.astype(np.float64) / float(probs.astype(np.float64).sum()))
        cp[-1] = 1.0
        index = int(np.searchsorted(cp, u, side="left"))
    observed = F32(-math.log2(float(probs[index])))
    new_mu = float(F32(F32(mu) - F32(eta) * F32(observed - F32(tau))))
    return kept, int(ids[index]), new_mu


def inverse_cdf(weights: np.ndarray, u: np.float32) -> int:
    """The index drawn with probability weights/sum(weights) from one uniform `u` (as MLX's
    `_inverse_cdf`: the first index whose cumulative weight exceeds ``u * total``)."""
    cdf = np.cumsum(weights, dtype=F32)
    index = int(np.searchsorted(cdf, u * cdf[-1], side="right"))
    return min(index, weights.shape[0] - 1)
