"""Teacher-forced statistics of a chunk of logits rows, as one lazy MLX graph (`engine.local.scoring`).

Row i of a chunk holds the logits after some id; its target is the id that actually comes next.
For each row the graph gives what a generated token shows (definitions: `engine.core.api`), with
no modifiers and nothing sampled: the target's ``log softmax``, its rank (1 + the tokens with a
strictly greater logit), the entropy in nats, and the top-N ids with their logprobs. Packed as one
float32 (rows, 3 + 2N) array, read back with one ``.tolist()`` per chunk: only these few numbers
per row leave the graph, never the (rows, vocab) matrix itself, and the caller bounds `rows` so
even that matrix stays a few tens of megabytes (`rows_per_chunk`).

Both engines use it: the MLX engine on its own logits, the GGUF engine on llama.cpp's rows (copied
into MLX), so a score means the same on both.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import mlx.core as mx

HEADER = 3  # logprob, rank, entropy
CHUNK_FLOATS = 1 << 24  # logits floats per chunk (64 MiB of float32): bounds the rows x vocab matrix
MIN_ROWS, MAX_ROWS = 16, 512


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


def stats_graph(logits: mx.array, targets: mx.array, candidates: int,
                exp: Callable[[mx.array], mx.array] = mx.exp) -> mx.array:
    """(rows, vocab) logits and (rows,) int32 targets -> (rows, HEADER + 2N) packed statistics.

    `exp` serves exponents <= 0 (the CPU speed layer's is faster than MLX's, ~3e-7 relative)."""
    x = logits.astype(mx.float32)
    m = mx.max(x, axis=-1, keepdims=True)
    xm = x - m
    e = exp(xm)
    z = mx.sum(e, axis=-1, keepdims=True)
    log_z = mx.log(z)
    entropy = log_z - mx.sum(mx.where(e > 0, e * xm, 0.0), axis=-1, keepdims=True) / z
    target = targets.astype(mx.int32)[:, None]
    chosen_x = mx.take_along_axis(x, target, axis=-1)
    logprob = chosen_x - m - log_z
    rank = mx.sum(x > chosen_x, axis=-1, keepdims=True).astype(mx.float32) + 1
    parts = [logprob, rank, entropy]
    vocab = x.shape[-1]
    n = min(candidates, vocab)
    if n:
        if n < vocab:
            ids = mx.argpartition(x, kth=vocab - n, axis=-1)[:, vocab - n:]
        else:
            ids = mx.broadcast_to(mx.arange(vocab)[None], x.shape)
        order = mx.argsort(-mx.take_along_axis(x, ids, axis=-1), axis=-1)
        ids = mx.take_along_axis(ids, order, axis=-1)
        parts += [ids.astype(mx.float32), mx.take_along_axis(xm, ids, axis=-1) - log_z]
    return mx.concatenate(parts, axis=-1)


def unpack(row: list[float]) -> RowStats:
    """One packed row as plain numbers."""
    n = (len(row) - HEADER) // 2
    ids, lps = row[HEADER:HEADER + n], row[HEADER + n:]
    return RowStats(float(row[0]), int(row[1]), float(row[2]),
                    tuple((int(i), float(lp)) for i, lp in zip(ids, lps)))
