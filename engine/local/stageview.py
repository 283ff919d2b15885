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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.core.api import SamplingParams
from engine.local.chain import ChainDraw, ExtendedChain, TokenVocab
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
