"""What each stage of the chain did to one token's candidates (the stage view's numbers).

Recomputed, not recorded: keeping every stage's distribution for every token would cost the
decode loop time and memory whether anyone looks or not. Instead `replay` runs the extended
chain (`engine.local.chain`) again over the reply's logits rows with the stored parameters, the
stored seed and the stored token ids as context, position by position, so its state (the uniform
numbers, XTC's coin, mirostat's mu) is the one the turn had; `stage_rows` then reads each
stage's probabilities for the candidates. With a stage beyond the classic ones on, both engines
drew with this very chain, so the replay is the computation that drew the token (`replay`
checks that it picks the stored tokens); with only classic stages on the engines drew with their
graph, whose distribution is the same (tests/test_sampling_lab.py), and the chosen token is the
stored one.

Where the logits rows come from is the engine's business (a forward pass over the prompt and the
reply); a remote server sends no logits, so there the view cannot be exact and says so.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from engine.core.api import SamplingParams
from engine.local.chain import ChainDraw, ExtendedChain, TokenVocab, needs_extended, xtc_on
from engine.local.stages import NEG_INF


@dataclass(frozen=True)
class StageRow:
    """One stage as the view lists it: each candidate's probability after it (0 and the stage's
    name where that stage removed it)."""

    stage: str
    probs: tuple[float, ...]  # per candidate, in the caller's order
    removed: tuple[bool, ...]  # removed by this very stage


def replay(rows: Sequence[np.ndarray], params: SamplingParams, seed: int, history: Sequence[int],
           tokens: Sequence[int], vocab: TokenVocab | None = None) -> list[ChainDraw]:
    """The traced chain at every position of a reply: `rows[i]` the logits before token i,
    `history` the ids before the reply, `tokens` the reply's ids. Raises ValueError when a
    replayed token differs from the stored one (the replay is not the turn's computation)."""
    from engine.local.sampling import next_uniform  # the engines' one uniform per token

    chain = ExtendedChain(params, rows[0].shape[0] if rows else 0, seed, vocab)
    uniforms = random.Random(seed)
    out = []
    for i, row in enumerate(rows):
        context = np.array(list(history) + list(tokens[:i]), dtype=np.int64)
        draw = chain.choose(row, context, next_uniform(uniforms), trace=True)
        if i < len(tokens) and draw.token != tokens[i]:
            raise ValueError(f"the replay drew {draw.token} at token {i}, the turn {tokens[i]}")
        out.append(draw)
    return out


def timeline(params: SamplingParams, changes: Sequence[tuple[int, SamplingParams]], count: int
             ) -> list[SamplingParams]:
    """The parameters each of `count` tokens was drawn with: `params`, then each change from its
    index on (oldest first, as `Version.changes` records them)."""
    out, current, pending = [], params, sorted(changes, key=lambda change: change[0])
    for i in range(count):
        while pending and pending[0][0] <= i:
            current = pending.pop(0)[1]
        out.append(current)
    return out


def rows_needed(plan: Sequence[SamplingParams]) -> list[int]:
    """The positions whose logits rows `replay_last` reads: the last one, and every one drawn
    with mirostat on (its mu follows each draw); the others only advance the random numbers."""
    last = len(plan) - 1
    return [i for i, p in enumerate(plan) if i == last or p.mirostat == 2]


def replay_last(rows: Mapping[int, np.ndarray], plan: Sequence[SamplingParams], seed: int, history: Sequence[int],
                tokens: Sequence[int], vocab: TokenVocab | None = None) -> tuple[ChainDraw, bool]:
    """The traced chain at the last of `tokens`, with the turn's state: `plan[i]` the parameters
    token i was drawn with, `rows` the logits before each position `rows_needed` names. Every
    earlier token advances the uniform numbers and XTC's coin as the turn did (one uniform per
    token; a coin per token while XTC is on). Returns (the draw, whether the chain drew the last
    token): with only classic stages on, the engines drew with their graph (the same
    distribution, tests/test_sampling_lab.py, but another walk for the draw), so there the
    stored token is the one shown."""
    from engine.local.sampling import next_uniform  # the engines' one uniform per token

    last = len(tokens) - 1
    chain: ExtendedChain | None = None
    uniforms = random.Random(seed)
    for i, params in enumerate(plan):
        u = next_uniform(uniforms)
        extended = needs_extended(params)
        if not extended and i < last:
            continue
        if chain is None:
            chain = ExtendedChain(params, rows[last].shape[0], seed, vocab)
        else:
            chain.set_params(params)
        if i < last and params.mirostat != 2:
            if xtc_on(params):
                chain.advance_coin()
            continue
        context = np.array(list(history) + list(tokens[:i]), dtype=np.int64)
        draw = chain.choose(rows[i], context, u, trace=i == last)
        if i < last and draw.token != tokens[i]:
            raise ValueError(f"the replay drew {draw.token} at token {i}, the turn {tokens[i]}")
    assert chain is not None
    return draw, needs_extended(plan[last])


def _probs(x: np.ndarray, ids: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.where(x > NEG_INF, np.exp(x - x.max()), 0.0)
    return e[ids] / e.sum()


def stage_rows(logits: np.ndarray, draw: ChainDraw, candidates: Sequence[int]) -> list[StageRow]:
    """raw (the model's logits), each stage in force, and the final distribution, for `candidates`."""
    ids = np.asarray(candidates, dtype=np.int64)
    model = np.asarray(logits, dtype=np.float32).reshape(-1)
    rows = [StageRow("model", tuple(_probs(model, ids).tolist()), (False,) * len(ids))]
    alive = np.ones(len(ids), dtype=bool)
    for name, x in draw.stages:
        now = x[ids] > NEG_INF
        rows.append(StageRow(name, tuple(_probs(x, ids).tolist()), tuple((alive & ~now).tolist())))
        alive &= now
    if draw.weights is None:
        final = (ids == draw.token).astype(np.float64)
    else:
        final = draw.weights[ids] / draw.weights.sum(dtype=np.float32)
    rows.append(StageRow("final", tuple(final.tolist()), (False,) * len(ids)))
    return rows
