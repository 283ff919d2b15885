"""Repetition, presence and frequency penalties: the first link of the sampling chain.

They act on the logits before anything else, so what they change counts as part of the *raw*
distribution (see `engine.core.api`). All three look at the same window: the last
``repetition_context_size`` token ids of the whole conversation, cached history included.

- repetition (CTRL-style, as mlx-lm's ``make_repetition_penalty``): every distinct id in the
  window has its logit divided by ``penalty`` when positive and multiplied when negative, once,
  however often it occurs;
- presence: ``presence_penalty`` is subtracted once per distinct id in the window;
- frequency: ``frequency_penalty * count`` is subtracted, count = occurrences in the window.

Switched-off penalties (1.0, 0.0, 0.0, or a window of 0) add nothing to the graph. The result is a
lazy graph; nothing here evaluates.
"""

from __future__ import annotations

from typing import Callable

import mlx.core as mx

from engine.core.api import SamplingParams

PenaltyFn = Callable[[mx.array, mx.array], mx.array]


def window_counts(context: mx.array, window: int, vocab_size: int) -> mx.array:
    """How often each id occurs in the last `window` ids of `context`, as a float32 (vocab,) array.

    Ids outside the vocabulary (which a well-formed context never holds) land in a spill slot
    that is dropped, instead of scattering out of bounds.
    """
    ids = context[-window:] if context.shape[0] > window else context
    ids = ids.astype(mx.int32)
    ids = mx.where((ids >= 0) & (ids < vocab_size), ids, vocab_size)
    counts = mx.zeros((vocab_size + 1,), dtype=mx.float32).at[ids].add(1.0)
    return counts[:vocab_size]


def make_penalties(params: SamplingParams) -> PenaltyFn | None:
    """The penalty step for these parameters as ``fn(logits, context) -> logits``.

    Returns None when every penalty is off, so the hot path skips the step entirely. Values are
    captured as mx scalars; the function works on float32 (vocab,) logits and an int 1-D context.
    """
    window = params.repetition_context_size
    repetition = params.repetition_penalty != 1.0
    presence = params.presence_penalty != 0.0
    frequency = params.frequency_penalty != 0.0
    if window == 0 or not (repetition or presence or frequency):
        return None
    rep_value = mx.array(params.repetition_penalty, dtype=mx.float32)
    presence_value = mx.array(params.presence_penalty, dtype=mx.float32)
    frequency_value = mx.array(params.frequency_penalty, dtype=mx.float32)

    def apply(logits: mx.array, context: mx.array) -> mx.array:
        """Only the switched-on penalties enter the graph (flags are fixed per parameter set)."""
        if context.size == 0:
            return logits
        counts = window_counts(context.reshape(-1), window, logits.shape[-1])
        seen = counts > 0
        if repetition:
            scaled = mx.where(logits < 0, logits * rep_value, logits / rep_value)
            logits = mx.where(seen, scaled, logits)
        if presence:
            logits = logits - presence_value * seen.astype(mx.float32)
        if frequency:
            logits = logits - frequency_value * counts
        return logits

    return apply
