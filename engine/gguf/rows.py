"""What-if previews on llama.cpp: k rows decoded together as k sequences of one context.

The MLX engine's previews (`engine.local.preview`) copy the cached prefix into a batch cache and
run one forward pass per token for every row. llama.cpp's own way to do the same is its sequence
API: the chat is sequence 0 of the context's memory; each preview row becomes sequence r (1..k)
that shares the chat's first `position` cells (``llama_memory_seq_cp``: in a unified KV buffer the
cells are tagged with the new sequence, nothing is copied); each step decodes one batch holding
every row's ids at that row's own positions, with logits for the last id of each row; at the end
the extra sequences are removed (``llama_memory_seq_rm``) and sequence 0 is exactly as it was, so
the next turn reuses the chat's cache as if no preview had run.

`RowsCache` is the batch cache `engine.local.preview` drives (`LlamaModel.batch_cache` makes it,
`LlamaModel.__call__` feeds it), so the preview loop, its sampling and its exactness rule are
the MLX engine's own. Every call runs on the engine thread, like every llama.cpp call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.core.api import ContextLimitError, EngineError
from engine.local.preview import MAX_ROWS

SEQUENCES = 1 + MAX_ROWS  # the chat's sequence 0 and the preview rows


class RowsCache:
    """The cache of one preview batch: sequences 1..`rows` holding the chat's first `position`
    cells, each row `offset` positions long (rows grow together, one step at a time)."""

    def __init__(self, model: Any, position: int, rows: int) -> None:
        if not 1 <= rows <= MAX_ROWS:
            raise EngineError(f"llama.cpp previews 1 to {MAX_ROWS} rows at once, not {rows}")
        self.model, self.rows, self.offset = model, rows, position
        memory = model.memory()
        for seq in range(1, rows + 1):
            model.lib.llama_memory_seq_rm(memory, seq, -1, -1)  # a row left over by a failed run
            if position:
                model.lib.llama_memory_seq_cp(memory, 0, seq, 0, position)

    @property
    def state(self) -> list[Any]:
        """Nothing for MLX to evaluate (llama.cpp computes eagerly)."""
        return []

    def close(self) -> None:
        """Remove the rows' sequences: the chat's sequence 0 keeps every cell it had."""
        memory = self.model.memory()
        for seq in range(1, self.rows + 1):
            self.model.lib.llama_memory_seq_rm(memory, seq, -1, -1)

    def feed(self, ids: np.ndarray) -> np.ndarray:
        """Decode (rows, S) ids, row r at positions offset.. of sequence r+1; returns the logits
        after each row's last id, (rows, vocab) float32 (a copy: llama.cpp reuses its buffer)."""
        rows, length = ids.shape
        if rows != self.rows or length < 1:
            raise EngineError(f"this preview batch feeds {self.rows} rows of ids, not shape {ids.shape}")
        entries = [(r, int(ids[r, i]), self.offset + i) for r in range(rows) for i in range(length)]
        out = np.empty((rows, self.model.args.vocab_size), dtype=np.float32)
        for start in range(0, len(entries), self.model.batch):
            chunk = entries[start:start + self.model.batch]
            wanted = [(index, r) for index, (r, _, pos) in enumerate(chunk) if pos == self.offset + length - 1]
            _decode(self.model, chunk, {index for index, _ in wanted})
            for index, r in wanted:
                out[r] = self.model.logits_at(index)
        self.offset += length
        return out


    def feed_rows(self, tokens: list[int]) -> np.ndarray:
        """A probe (one row): decode `tokens` after the row's cells with the logits of every one,
        (len(tokens), vocab) float32 (a copy)."""
        if self.rows != 1:
            raise EngineError("llama.cpp reads every row's logits for one row at a time")
        rows_logits_decode(self.model, tokens, 1, self.offset)
        self.offset += len(tokens)
        return self.model.all_logits(len(tokens))


def rows_logits_decode(model: Any, tokens: list[int], seq: int, position: int) -> None:
    """One ``llama_decode`` of `tokens` into sequence `seq` from `position`, every logit asked
    (scoring reads each row: `engine.local.scoring`)."""
    _decode(model, [(seq - 1, token, position + i) for i, token in enumerate(tokens)], set(range(len(tokens))))


def _decode(model: Any, chunk: list[tuple[int, int, int]], outputs: set[int]) -> None:
    """One ``llama_decode`` of (row, token, position) entries; logits for the `outputs` indices."""
    lib = model.lib
    batch = lib.llama_batch_init(len(chunk), 0, 1)
    try:
        for index, (row, token, pos) in enumerate(chunk):
            batch.token[index] = token
            batch.pos[index] = pos
            batch.n_seq_id[index] = 1
            batch.seq_id[index][0] = row + 1
            batch.logits[index] = 1 if index in outputs else 0
        batch.n_tokens = len(chunk)
        status = lib.llama_decode(model.context(), batch)
    finally:
        lib.llama_batch_free(batch)
    if status == 1:
        raise ContextLimitError("llama.cpp's cache has no room left for these previews.")
    if status != 0:
        raise EngineError(f"llama.cpp could not decode a preview step (status {status})")


def rows_that_fit(model: Any, used: int, cells_per_row: int) -> int:
    """How many rows of `cells_per_row` new cells fit beside the chat's `used` ones (at most
    MAX_ROWS), in the context's cells (``llama_n_ctx``: the asked size rounded up to 256)."""
    free = int(model.lib.llama_n_ctx(model.context())) - used
    return max(0, min(MAX_ROWS, free // max(cells_per_row, 1)))

