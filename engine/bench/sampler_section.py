"""Per-token sampler cost: mlx-lm's `make_sampler` vs the engine's `LiveSampler`, ms per token.

Logits are Zipf-shaped (see `_zipf_logits`). They do different amounts of work, which is the point of measuring: mlx-lm only draws a token;
`LiveSampler` also computes the rank, entropy and the top-10 candidates with both probabilities,
and packs them for one device-to-host read. Both get the same random logits, in float32.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import mlx.core as mx

from engine.core.api import SamplingParams
from engine.bench.report import Section, alternate

ALL_FILTERS = dict(temperature=0.7, top_k=40, top_p=0.9, min_p=0.05)
TOP_P_ONLY = dict(temperature=0.7, top_p=0.9)


def _per_token_ms(step: Callable[[int], None], iterations: int) -> float:
    """Mean time per call over `iterations` calls, after two warm-up calls (traces, compiles)."""
    step(0)
    step(1)
    start = time.perf_counter()
    for i in range(iterations):
        step(i)
    return (time.perf_counter() - start) / iterations * 1e3


def _zipf_logits(vocab: int, seed: int) -> "mx.array":
    """Logits whose probabilities fall off like rank^-1.5 in a random token order: peaked like a
    confident language model (top-p 0.9 keeps a few hundred tokens), unlike uniform noise."""
    import mlx.core as mx

    ranks = mx.random.permutation(vocab, key=mx.random.key(seed)).astype(mx.float32)
    return (-1.5 * mx.log1p(ranks)).reshape(1, vocab)


def _contenders(vocab: int, knobs: dict[str, float], iterations: int) -> dict[str, Callable[[int], float]]:
    import mlx.core as mx
    from mlx_lm.sample_utils import make_sampler

    from engine.cpu.fastmath import exp_nonpositive  # the exponential the app's sampler uses on a CPU
    from engine.local.sampling import LiveSampler

    rows = [_zipf_logits(vocab, seed) for seed in range(8)]
    context = mx.random.randint(0, vocab, (256,), key=mx.random.key(99))
    mx.eval(rows, context)
    sampler = make_sampler(temp=knobs["temperature"], top_p=knobs.get("top_p", 0.0),
                           min_p=knobs.get("min_p", 0.0), top_k=int(knobs.get("top_k", 0)))
    live = LiveSampler(vocab, SamplingParams(candidates=10, **knobs), seed=0,  # type: ignore[arg-type]
                       exp=exp_nonpositive)

    def plain(i: int) -> None:
        logits = rows[i % len(rows)]
        token = sampler(logits - mx.logsumexp(logits, axis=-1, keepdims=True))
        token.item()

    def engine(i: int) -> None:
        token, row = live.step(rows[i % len(rows)], context)
        mx.eval(token, row)
        row.tolist()

    return {"mlx-lm": lambda _r: _per_token_ms(plain, iterations),
            "live": lambda _r: _per_token_ms(engine, iterations)}


def sampler_section(section: Section, vocabs: tuple[int, ...], iterations: int, rounds: int) -> None:
    """Rows and ratios for each vocabulary size and filter set."""
    for vocab in vocabs:
        for label, knobs in (("temp+top-k+top-p+min-p", ALL_FILTERS), ("temp+top-p", TOP_P_ONLY)):
            samples = alternate(_contenders(vocab, knobs, iterations), rounds)
            tag = f"{label}, vocab {vocab:,}"
            section.add(f"mlx-lm make_sampler, {tag}", samples["mlx-lm"], "ms/tok")
            section.add(f"LiveSampler + 10 candidates, {tag}", samples["live"], "ms/tok")
            section.compare(f"LiveSampler / mlx-lm, {tag}", samples["live"], samples["mlx-lm"])
