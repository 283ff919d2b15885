"""The stage view command on the engine thread: recompute a token's logits, replay its chain.

A turn keeps no logits row (a row per token would cost the decode loop a copy of the whole
vocabulary and the chat its memory, whether anyone looks or not), so the view recomputes: one
forward pass over the prompt and the reply up to the token, in a cache of its own that starts
from the session's cached prefix (`engine.local.preview.batch_cache`: the chat's cache is read,
never written, llama.cpp's through a sequence of its own), then `engine.local.stageview` replays
the chain with the turn's parameters, seed and state. The last id is fed alone, as the turn's
decode step fed it, so the row is the one the turn computed up to the rounding of the earlier
positions' keys and values (batched here, one at a time there). Rows are read only where the
replay needs numbers: the token's own, and every earlier one drawn with mirostat on.

Runs on the engine thread only (it imports MLX).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
import numpy as np

from engine.core.api import ContextLimitError, EngineError, StageRequest, StageView
from engine.local.prompt import common_prefix_len
from engine.local.preview import _release, _usable, batch_cache
from engine.local.session import PREFILL_CHUNK, Session
from engine.local.stageview import replay_last, rows_needed, stage_rows, timeline

MAX_TOKENS = 100_000  # a reply longer than any context: refused before any work


def check_request(request: StageRequest, vocab_size: int) -> None:
    """Refuse a malformed request in one line, before any MLX work."""
    if not request.messages:
        raise EngineError("The stage view needs the conversation that the token answers.")
    if not 1 <= len(request.tokens) <= MAX_TOKENS:
        raise EngineError("The stage view needs the reply's ids up to the token it shows.")
    if request.params.seed is None:
        raise EngineError("This reply has no recorded seed: its draws cannot be replayed.")
    for token in (*request.tokens, *request.candidates):
        if type(token) is not int or not 0 <= token < vocab_size:
            raise EngineError(f"Token id {token!r} is not in 0..{vocab_size - 1} for this model.")


def run_stage_view(session: Session, request: StageRequest) -> StageView:
    """The stage view of the last of `request.tokens` (see `engine.core.api.StageView`)."""
    check_request(request, session.vocab_size)
    prompt = session.prompt(request.messages, request.continue_last, request.thinking)
    tokens = list(request.tokens)
    plan = timeline(request.params, request.changes, len(tokens))
    needed = rows_needed(plan)
    rows = logits_rows(session, prompt, tokens, needed)
    assert request.params.seed is not None
    try:
        draw, by_chain = replay_last(rows, plan, request.params.seed, prompt, tokens, session.token_vocab)
    except ValueError as error:
        raise EngineError(f"The replay does not match this reply ({error}): its numbers would not be "
                          "the ones it was drawn with.") from None
    last = tokens[-1]
    candidates = list(dict.fromkeys([*request.candidates, last]))
    table = stage_rows(rows[len(tokens) - 1], draw, candidates)
    removed_by = []
    for k in range(len(candidates)):
        stage = next((row.stage for row in table if row.removed[k]), "")
        if not stage and table[-1].probs[k] == 0.0:
            stage = "greedy" if draw.weights is None else "the draw"
        removed_by.append(stage)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        raw = draw.raw.astype(np.float64)
        logprobs = raw - (raw.max() + np.log(np.exp(raw - raw.max()).sum()))
    final = dict(zip(candidates, table[-1].probs))
    if (draw.token != last) if by_chain else final[last] == 0.0:
        raise EngineError(f"The replay does not match this reply (it drew {draw.token} where the reply has {last}): "
                          "its numbers would not be the ones it was drawn with.")
    return StageView(tuple(candidates), tuple((row.stage, row.probs) for row in table), tuple(removed_by),
                     last, tuple(float(logprobs[c]) for c in candidates))


def logits_rows(session: Session, prompt: Sequence[int], tokens: Sequence[int], needed: Sequence[int]
                ) -> dict[int, np.ndarray]:
    """{i: the float32 logits before reply token i} for each i in `needed` (ascending), from a
    cache of the view's own (the session's cache and ids are left as they were)."""
    full = [*prompt, *tokens]
    ends = [len(prompt) + i for i in needed]
    if ends[-1] > session.context_limit:
        raise ContextLimitError("The reply does not fit this model's context any more: no row to recompute.")
    start = _usable(session, min(common_prefix_len(session.tokens, full), ends[0] - 1))
    fits = getattr(session.model, "preview_rows", None)
    if fits is not None and int(fits(ends[-1] - start)) < 1:
        raise ContextLimitError("The context has no room left beside the chat to recompute this token.")
    out: dict[int, np.ndarray] = {}
    with mx.stream(session.stream):
        cache = batch_cache(session, start, 1)
        try:
            position = start
            for i, end in zip(needed, ends):
                position = _feed(session, cache, full, position, end - 1)  # all but the last id, no head read
                logits = session.model(mx.array([full[end - 1:end]], dtype=mx.int32), cache=cache)
                out[i] = np.array(logits[0, -1, :].astype(mx.float32))
                position = end
        finally:
            _release(cache)
    return out


def _feed(session: Session, cache: list[Any], full: Sequence[int], position: int, end: int) -> int:
    """Feed `full[position:end]` in prefill-sized chunks, evaluating only the cache; returns `end`."""
    for at in range(position, end, PREFILL_CHUNK):
        part = full[at:min(end, at + PREFILL_CHUNK)]
        session.model(mx.array([part], dtype=mx.int32), cache=cache)
        mx.eval([layer.state for layer in cache])
    return end
