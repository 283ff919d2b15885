"""Teacher-forced statistics of a chunk of logits rows (`engine.local.scoring`), in numpy.

Row i of a chunk holds the logits after some id; its target is the id that actually comes next.
For each row this gives what a generated token shows (definitions: `engine.core.api`), with no
modifiers and nothing sampled: the target's ``log softmax``, its rank (1 + the tokens with a
strictly greater logit), the entropy in nats, and the top-N ids with their logprobs. Only these
few numbers per row are kept; the caller bounds a chunk's rows (`rows_per_chunk`) so its
(rows, vocab) logits stay a few tens of megabytes, and the work here goes `BLOCK_ROWS` rows at a
time, so its temporaries stay in the CPU's caches.

Why numpy and not an MLX graph: on a CPU these are elementwise passes and a partial sort over
the whole vocabulary for every row. Measured on the 30M shape's (512, 32000) chunk (2-core VM,
noisy): MLX's CPU kernels took 960 ms (its ``exp`` alone 436 ms, ``argpartition`` 265 ms), numpy's
180-200 ms (``exp`` 64 ms, ``argpartition`` 79 ms). Both engines use it: the MLX engine on its
logits (read back without a copy), the GGUF engine on llama.cpp's rows, so a score means the same
on both.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

CHUNK_FLOATS = 1 << 24  # logits floats per chunk (64 MiB of float32): bounds the rows x vocab matrix
MIN_ROWS, MAX_ROWS = 16, 512
BLOCK_ROWS = 16  # rows computed together: temporaries of 16 x vocab floats


class RowStats(NamedTuple):
    """One scored position's statistics as plain numbers (the caller adds the text)."""

    logprob: float
    rank: int
    entropy: float
    candidates: tuple[tuple[int, float], ...]  # (id, logprob), best first


def rows_per_chunk(vocab: int) -> int:
    """How many positions one scoring pass takes: as many as keep the chunk's logits within
    `CHUNK_FLOATS`, at least `MIN_ROWS` (a huge vocabulary still moves) and at most `MAX_ROWS`."""
    return max(MIN_ROWS, min(MAX_ROWS, CHUNK_FLOATS // max(vocab, 1)))


def row_stats(logits: np.ndarray, targets: np.ndarray, candidates: int) -> list[RowStats]:
    """(rows, vocab) logits and (rows,) target ids -> each row's statistics, in order."""
    x = np.asarray(logits, dtype=np.float32)
    out: list[RowStats] = []
    for start in range(0, x.shape[0], BLOCK_ROWS):
        out.extend(_block(x[start:start + BLOCK_ROWS], np.asarray(targets[start:start + BLOCK_ROWS]), candidates))
    return out


def _block(x: np.ndarray, targets: np.ndarray, candidates: int) -> list[RowStats]:
    """The statistics of a few rows (see the module docstring); sums in float64."""
    rows, vocab = x.shape
    m = x.max(axis=-1, keepdims=True)
    xm = x - m
    e = np.exp(xm)
    z = e.sum(axis=-1, dtype=np.float64)
    np.multiply(e, xm, out=e, where=e > 0)  # p log p unnormalised; a token of p 0 adds 0 (not 0 * -inf)
    plogp = e.sum(axis=-1, dtype=np.float64)
    log_z = np.log(z)
    entropy = log_z - plogp / z
    index = np.arange(rows)
    chosen = x[index, targets]
    logprob = chosen.astype(np.float64) - m[:, 0] - log_z
    rank = (x > chosen[:, None]).sum(axis=-1) + 1
    n = min(candidates, vocab)
    if n:
        ids = np.argpartition(x, vocab - n, axis=-1)[:, vocab - n:] if n < vocab else np.tile(np.arange(vocab), (rows, 1))
        order = np.argsort(-np.take_along_axis(x, ids, axis=-1), axis=-1, kind="stable")
        ids = np.take_along_axis(ids, order, axis=-1)
        lps = np.take_along_axis(xm, ids, axis=-1).astype(np.float64) - log_z[:, None]
        listed = [tuple(zip(row_ids.tolist(), row_lps.tolist())) for row_ids, row_lps in zip(ids, lps)]
    else:
        listed = [()] * rows
    return [RowStats(float(lp), int(r), float(h), c)
            for lp, r, h, c in zip(logprob.tolist(), rank.tolist(), entropy.tolist(), listed)]
