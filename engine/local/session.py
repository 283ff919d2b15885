"""A loaded model and its KV cache, with the exact list of token ids that sit in that cache.

The cache lives across turns. Every turn the caller's whole conversation is rendered to ids; the
longest prefix shared with `tokens` is kept, the rest of the cache is trimmed off, and only the
new suffix is prefilled. Caches that cannot be trimmed (a sliding-window `RotatingKVCache` that has
wrapped, SSM state) are put back to the newest snapshot before the point where the conversations
part (`engine.local.snapshots`: taken where each turn and each reply starts), or, with none there,
rebuilt from scratch: slower, never silently wrong.

Runs on the engine thread only (it imports MLX).
"""

from __future__ import annotations

import functools
from contextlib import nullcontext
from typing import Any, Callable, Sequence

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import KVCache, can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

from engine.local.chain import TokenVocab
from engine.local.lastrow import LastRowHead
from engine.core.api import Message
from engine.local.loaders import ModelRuntime, vocab_size
from engine.local.prompt import TextEncoder, admitted_ids, common_prefix_len
from engine.local.snapshots import CacheSnapshots, wraps_within
from engine.local.textstream import PieceCache

PREFILL_CHUNK = 512  # tokens per prefill forward pass: bounds peak memory on long prompts


class Session:
    """One loaded model: weights, tokenizer, and the cache bookkeeping between turns."""

    def __init__(
        self, model: Any, tokenizer: Any, context_limit: int, stream: mx.Stream, last_row: LastRowHead | None = None,
        *, sampler_exp: Callable[[mx.array], mx.array] = mx.exp, vocab: int | None = None,
    ) -> None:
        """`context_limit` is already capped by the caller's maximum; the cache starts empty.
        `last_row` restricts the model's output head to the last position (`engine.local.lastrow`);
        `sampler_exp` is the exponential each turn's sampler uses (the CPU speed layer's is faster);
        `vocab`, the rows of the embedding table (default: `engine.local.loaders.vocab_size`)."""
        self.model = model
        self.vocab_size = vocab if vocab is not None else vocab_size(model, tokenizer)
        self.sampler_exp = sampler_exp
        self.last_row = last_row
        self.tokenizer = tokenizer
        self.context_limit = context_limit
        self.pieces = PieceCache(tokenizer)
        self.encode = TextEncoder(tokenizer)  # remembers the conversation's text runs between turns
        self.stream = stream  # the engine thread's own stream: MLX streams belong to a thread
        self.cache: list[Any] = make_prompt_cache(model)
        self.tokens: list[int] = []  # exactly the ids whose keys/values are in `cache`, in order
        # position -> (candidates asked, its teacher-forced statistics) for cached positions that
        # were scored (`engine.local.scoring`); any change to `tokens` before a position drops it
        self.scores: dict[int, tuple[int, Any]] = {}
        self.stats_pool: Any = None  # the scores' statistics thread, made on first use (`engine.local.scoring`)
        self.snapshots = CacheSnapshots()  # of the layers that cannot be trimmed, at turn boundaries
        self.rebuilds = 0  # how often a non-trimmable cache had to be thrown away (for tests, stats)
        self.disk: Any = None  # an `engine.local.kvdisk.DiskKVCache`: recent histories' caches on disk
        # makes each turn's decoder from (session, control); None: `engine.local.turn`'s MLX one
        self.decoder_factory: Callable[..., Any] | None = None
        self.runtime = ModelRuntime()  # what this kind of model does differently (engine.local.loaders)

    def prompt(self, messages: Sequence[Message], continue_last: bool, thinking: bool | None = None) -> list[int]:
        """The ids a turn, branch, preview row or warm-up feeds for `messages`: rendered with this
        session's encoder and checked, every one, against the embedding (`admitted_ids`)."""
        return admitted_ids(self.tokenizer, messages, continue_last, self.vocab_size, self.encode, thinking)

    @functools.cached_property
    def token_vocab(self) -> TokenVocab:
        """The tokenizer as DRY's sequence breakers read it: each id's bytes, and a breaker's tail
        tokenized without special tokens (llama.cpp's ``get_overlapping_token_sequences``)."""
        tokenizer = self.tokenizer
        return TokenVocab(len(tokenizer), self.pieces.token_bytes,
                          lambda text: list(tokenizer.encode(text, add_special_tokens=False)))

    def reuse_prefix(self, prompt: Sequence[int]) -> int:
        """Cut the cache back to what `prompt` shares with it; returns how many ids are reused.

        At least one prompt id is always left to prefill, since the next token's logits come
        from feeding the last prompt id.
        """
        self._from_disk(prompt)
        keep = common_prefix_len(self.tokens, prompt)
        return self._trim_to(keep - 1 if keep == len(prompt) else keep)

    def keep_prefix(self, ids: Sequence[int]) -> int:
        """Cut the cache back to what `ids` shares with it (all of it may be kept); returns that length."""
        self._from_disk(ids)
        return self._trim_to(common_prefix_len(self.tokens, ids))

    def _from_disk(self, prompt: Sequence[int]) -> None:
        """A reopened chat whose history's cache is on disk starts from it (`engine.local.kvdisk`)."""
        if self.disk is not None:
            self.disk.restore(self, prompt)

    def install(self, cache: list[Any], tokens: list[int]) -> None:
        """Take `cache` (holding exactly `tokens`) as the session's: a cache read back from disk."""
        self.cache, self.tokens = cache, tokens
        self.scores = {}
        self.snapshots.clear()

    def _trim_to(self, keep: int) -> int:
        """Drop every cached position from `keep` on; returns how many ids the cache still holds.

        A cache that cannot be trimmed goes back to its newest snapshot at or before `keep`,
        else starts over (0).
        """
        drop = len(self.tokens) - keep
        if drop <= 0:
            return keep
        if can_trim_prompt_cache(self.cache) and trim_prompt_cache(self.cache, drop) == drop:
            kept: int | None = keep
        else:
            kept = self.snapshots.restore(self.cache, keep, len(self.tokens))
            if kept is None:
                self.reset_cache()
                return 0
        assert kept is not None  # both branches above leave a count or return
        del self.tokens[kept:]
        self.scores = {position: row for position, row in self.scores.items() if position < kept}
        self.snapshots.forget_after(kept)
        return kept

    def snapshot(self) -> bool:
        """Keep a copy of the layers that cannot be trimmed, at the current position (a turn
        boundary a regenerate, branch or edit may rewind to); returns whether one was taken."""
        return self.snapshots.take(self.cache, len(self.tokens))

    def reserve(self, room: int) -> int:
        """Make each layer's key/value buffers hold `room` more positions; returns the layers grown.

        Why: mlx-lm's `KVCache` grows its buffers 256 positions at a time, by copying the whole
        cache into a bigger one inside the forward pass that overflows it. When that pass is the
        next turn's prefill, the copy lands on the time to first token: a 39-token follow-up over
        1,000 cached positions of the 30M bench model took 49 ms instead of 34 (docs/benchmarks-history.md). Called
        while the engine is idle (`engine.local.warmup`), the copy happens before the user presses
        Enter. Only plain `KVCache` layers are grown: the layout of other caches is theirs.
        """
        grown: list[mx.array] = []
        for layer in self.cache:
            if type(layer) is not KVCache or layer.keys is None or layer.values is None \
                    or layer.keys.shape[2] - layer.offset >= room:
                continue
            extra = -(-room // layer.step) * layer.step  # whole steps, as mlx-lm itself grows
            layer.keys = _with_room(layer.keys, layer.offset, extra)
            layer.values = _with_room(layer.values, layer.offset, extra)
            grown.extend((layer.keys, layer.values))
        mx.eval(grown)  # now, not inside the next forward pass
        return len(grown) // 2

    def reset_cache(self) -> None:
        """Start from an empty cache (also the safe state after a failed turn)."""
        self.cache = make_prompt_cache(self.model)
        self.tokens = []
        self.scores = {}
        self.snapshots.clear()
        self.rebuilds += 1

    def prefill(
        self, ids: Sequence[int], should_stop: Callable[[], bool] = lambda: False, chunk: int | None = None
    ) -> bool:
        """Feed `ids` into the cache without asking for logits, `chunk` ids per forward pass
        (default `PREFILL_CHUNK`).

        `should_stop` is asked between chunks (a long prompt on a slow CPU takes seconds per
        chunk); returns False if it stopped early. Whatever was fed stays cached and recorded.
        """
        chunk = chunk or PREFILL_CHUNK
        for start in range(0, len(ids), chunk):
            if should_stop():
                return False
            part = list(ids[start : start + chunk])
            self.model(mx.array(part, dtype=mx.int32)[None], cache=self.cache)
            mx.eval([c.state for c in self.cache])
            self.tokens.extend(part)
        return True

    def forward(self, ids: mx.array) -> mx.array:
        """Feed 1-D `ids` (lazily) and return the logits after the last one, shape (vocab,).

        Several ids at once compute the output head for the last one only, when `last_row` is
        set. The caller records the fed ids in `tokens` once their values are known.
        """
        head = self.last_row if ids.shape[0] > 1 and self.last_row is not None else nullcontext()
        with head:
            return self.model(ids[None], cache=self.cache)[0, -1, :]

    def rows(self, ids: Sequence[int], cache: list[Any] | None = None) -> np.ndarray:
        """Feed `ids` (to `cache`, default the session's) and return the logits after every one of
        them, (len(ids), vocab) float32, computed now: what scoring reads (`engine.local.scoring`).
        The caller keeps `ids` short (`engine.local.scorerows.rows_per_chunk`) and records them in
        `tokens`."""
        cache = self.cache if cache is None else cache
        own = getattr(self.model, "rows_logits", None)  # llama.cpp: every row asked of its decode
        if own is not None:
            return np.asarray(own(list(ids), cache))
        logits = self.model(mx.array(list(ids), dtype=mx.int32)[None], cache=cache)[0].astype(mx.float32)
        mx.eval([logits] + [layer.state for layer in cache])
        return np.asarray(logits)  # a view of MLX's buffer, no copy

    def split_prompt(self, suffix: Sequence[int]) -> tuple[Sequence[int], Sequence[int]]:
        """(prefilled without logits, fed for the first token's logits).

        With a last-row head the whole final chunk gives the logits in the same pass; without
        one only the last id does (a head over every position of a chunk would cost more than
        the extra one-token pass it saves). A cache that cannot be trimmed once `suffix` is in
        (SSM state, a sliding window that wraps) also feeds the last id alone: the snapshot
        where the reply starts is taken between the two, so a regenerate prefills one id
        instead of the whole history, for the price of one decode step now.
        """
        if self.last_row is None or wraps_within(self.cache, len(suffix)):
            return suffix[:-1], suffix[-1:]
        cut = max(0, len(suffix) - PREFILL_CHUNK)
        return suffix[:cut], suffix[cut:]

    def check(self) -> None:
        """Assert the bookkeeping invariant: the id list is exactly as long as the cache."""
        offset = cache_offset(self.cache)
        if offset is not None and offset != len(self.tokens):
            raise AssertionError(f"cache holds {offset} positions but {len(self.tokens)} ids are recorded")

    def close(self) -> None:
        """Drop the cache and free MLX's buffer cache (on this thread, like every MLX call)."""
        self.cache = []
        self.tokens = []
        self.scores = {}
        self.snapshots.clear()
        if self.stats_pool is not None:
            self.stats_pool.shutdown(wait=False)
        mx.clear_cache()


def _with_room(buffer: mx.array, used: int, extra: int) -> mx.array:
    """The first `used` positions of a (B, heads, positions, dim) buffer, then `extra` free ones."""
    b, heads, _, dim = buffer.shape
    return mx.concatenate([buffer[..., :used, :], mx.zeros((b, heads, extra, dim), buffer.dtype)], axis=2)


def cache_offset(cache: Sequence[Any]) -> int | None:
    """Positions held by a model's cache, where the cache type says (SSM caches do not)."""
    for layer_cache in cache:
        offset = getattr(layer_cache, "offset", None)
        if isinstance(offset, int):
            return offset
    return None
