"""What-if previews: the next few tokens after each of k candidates, decoded as one batch.

Why a batch: each row is a short turn over the same long prefix, so k separate turns would pay k
decode steps per token. Here the prefix's keys and values are copied once per row into a batch
cache (B = k) and one forward pass per token serves every row.

Exactness: a row is the turn that `PreviewRequest.branch` describes. It renders the same prompt,
starts from the same cached keys and values, samples with its own `LiveSampler` seeded as that
turn's would be (one uniform per token, the same penalty window), stops at the same stop token
or token limit. So a preview is what choosing its candidate then produces.

The session is read, never written: its cache layers are sliced or copied (MLX arrays are copy
on write, and the batch cache writes into its own buffers), and `session.tokens` is untouched,
so the next turn reuses and prefills exactly what it would have without the previews.

Runs on the engine thread only (it imports MLX).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache, make_prompt_cache

from engine.core.api import (
    Candidate,
    ContextLimitError,
    EngineError,
    FinishReason,
    Preview,
    PreviewFinished,
    PreviewRequest,
    PreviewToken,
    TokenEvent,
)
from engine.local.penalties import make_penalties
from engine.local.prompt import common_prefix_len
from engine.local.chain import needs_extended, recent_ids
from engine.local.sampling import LiveSampler, logits_were_numbers
from engine.local.session import Session
from engine.local.textstream import ReplyText

MAX_ROWS = 16  # previews asked at once: a batch this wide already costs more than it shows
MAX_TOKENS = 256  # tokens per preview: a preview is a glance, not a reply


@dataclass
class _Row:
    """One candidate's preview as it grows."""

    candidate: int
    prompt: list[int]  # the branch turn's whole prompt (the candidate last)
    text: ReplyText
    ids: list[int] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)
    reason: FinishReason | None = None  # set once the row is finished

    def done(self) -> Preview:
        """The finished row (an unfinished one was cut short)."""
        self.pieces.append(self.text.flush())
        return Preview(self.candidate, tuple(self.ids), "".join(self.pieces), self.reason or "cancelled")


def check_request(request: PreviewRequest, vocab_size: int) -> None:
    """Refuse a malformed request in one line, before any MLX work."""
    last = request.messages[-1] if request.messages else None
    if last is None or last.role != "assistant" or last.token_ids is None:
        raise EngineError("A preview needs a conversation that ends with a reply's exact token ids.")
    if not 1 <= len(request.candidates) <= MAX_ROWS:
        raise EngineError(f"A preview takes 1 to {MAX_ROWS} candidates, got {len(request.candidates)}.")
    if not 1 <= request.tokens <= MAX_TOKENS:
        raise EngineError(f"A preview is 1 to {MAX_TOKENS} tokens long, got {request.tokens}.")
    for candidate in request.candidates:
        if type(candidate) is not int or not 0 <= candidate < vocab_size:
            raise EngineError(f"Candidate {candidate!r} is not a token id of this model (0..{vocab_size - 1}).")


def run_preview(
    session: Session, request: PreviewRequest, stop: Callable[[], bool], emit: Callable[[PreviewToken], None]
) -> PreviewFinished:
    """Decode every row of `request` together; `stop` is asked before each step (a real command
    waits, or the caller left), and then the unfinished rows end "cancelled"."""
    started = time.perf_counter()
    rows = [_row(session, request, candidate) for candidate in request.candidates]
    limit = min(request.tokens, session.context_limit - max(len(row.prompt) for row in rows))
    if limit < 1:
        raise ContextLimitError("The reply already fills the context: there is no room to preview.")
    with mx.stream(session.stream):
        for group in _groups(session, rows, limit):
            batch = _Batch(session, request, group, emit, rows)
            try:
                batch.run(limit, stop)
            finally:
                _release(batch.cache)
    return PreviewFinished(tuple(row.done() for row in rows), time.perf_counter() - started)


def _release(cache: list[Any]) -> None:
    """Give back what a batch cache holds outside MLX (llama.cpp's preview sequences)."""
    for layer in cache:
        close = getattr(layer, "close", None)
        if callable(close):
            close()


def _row(session: Session, request: PreviewRequest, candidate: int) -> _Row:
    """A row with its branch prompt, rendered exactly as that turn would render it."""
    branch = request.branch(candidate)
    prompt = session.prompt(branch.messages, True)
    return _Row(candidate, prompt, ReplyText(session.tokenizer, branch.messages[-1].token_ids or ()))


def _groups(session: Session, rows: list[_Row], limit: int) -> list[tuple[int, list[_Row]]]:
    """(cached prefix length, rows) batches: rows whose uncached suffixes have one length share
    a forward pass (nearly always all of them: the prompts differ only in the candidate), as many
    at once as the model's cache has room for (llama.cpp's fixed cells: `_rows_at_once`)."""
    start = min(min(common_prefix_len(session.tokens, row.prompt), len(row.prompt) - 1) for row in rows)
    start = _usable(session, start)
    by_length: dict[int, list[_Row]] = {}
    for row in rows:
        by_length.setdefault(len(row.prompt) - start, []).append(row)
    out = []
    for length, group in by_length.items():
        width = _rows_at_once(session, length + limit)
        out.extend((start, group[i:i + width]) for i in range(0, len(group), width))
    return out


def _rows_at_once(session: Session, cells_per_row: int) -> int:
    """How many rows one batch may hold: all of them for MLX (its batch cache grows), what fits
    in the context's remaining cells for llama.cpp (`LlamaModel.preview_rows`); one line if none."""
    fits = getattr(session.model, "preview_rows", None)
    if fits is None:
        return MAX_ROWS
    width = int(fits(cells_per_row))
    if width < 1:
        raise ContextLimitError("The context has no room left for a preview here.")
    return width


def _usable(session: Session, keep: int) -> int:
    """The longest prefix, at most `keep` ids, that the cache can give without rewinding it: any
    prefix of plain KV layers (or of llama.cpp's memory, whose sequences share cells), else all it
    holds, else the newest snapshot at or before `keep`."""
    if (all(type(layer) is KVCache for layer in session.cache) or keep == len(session.tokens)
            or hasattr(session.model, "batch_cache")):
        return keep
    usable = [p for p in session.snapshots.positions if p <= keep]
    return usable[-1] if usable else 0


def batch_cache(session: Session, position: int, rows: int, room: int = 0) -> list[Any]:
    """A fresh cache holding the session's first `position` ids, `rows` times over (batch axis).

    Plain KV layers get `room` free positions as well, in the same copy: mlx-lm grows a full
    buffer by copying it whole, and the first step of a batch would otherwise do that at once.
    """
    own = getattr(session.model, "batch_cache", None)
    if own is not None:  # llama.cpp: rows are sequences sharing the chat's cells (engine.gguf.rows)
        return own(position, rows)
    if position == 0:
        return make_prompt_cache(session.model)
    kept = session.snapshots.layers_at(position) if position < len(session.tokens) else {}
    layers = []
    for i, layer in enumerate(session.cache):
        if type(layer) is KVCache:
            layers.append(_sliced(layer, position, rows, room))
            continue
        copied = copy.deepcopy(kept.get(i, layer))
        copied.state = _tiled(copied.state, rows)
        layers.append(copied)
    return layers


def _sliced(layer: KVCache, position: int, rows: int, room: int) -> KVCache:
    """A new KV layer holding the first `position` positions of `layer` (which is not changed),
    `rows` times over, with `room` free positions after them."""
    fresh = KVCache()
    if position and layer.keys is not None:
        fresh.keys, fresh.values = (_with_room(_tiled(part[..., :position, :], rows), room)
                                    for part in (layer.keys, layer.values))
        fresh.offset = position
    return fresh


def _with_room(buffer: mx.array, room: int) -> mx.array:
    """`buffer` (B, heads, positions, dim) followed by `room` zero positions."""
    if room <= 0:
        return buffer
    b, heads, _, dim = buffer.shape
    return mx.concatenate([buffer, mx.zeros((b, heads, room, dim), buffer.dtype)], axis=2)


def _tiled(state: Any, rows: int) -> Any:
    """Every array of a layer's state repeated along its batch axis (other entries kept)."""
    if isinstance(state, mx.array):
        return mx.repeat(state, rows, axis=0) if rows > 1 else state
    if isinstance(state, (tuple, list)):
        return type(state)(_tiled(part, rows) for part in state)
    return state


class _Batch:
    """One forward pass per token for a group of rows whose suffixes have the same length."""

    def __init__(self, session: Session, request: PreviewRequest, group: tuple[int, list[_Row]],
                 emit: Callable[[PreviewToken], None], order: list[_Row]) -> None:
        self.session = session
        self.start, self.rows = group
        self.numbers = [order.index(row) for row in self.rows]
        self.emit = emit
        room = max(len(row.prompt) for row in self.rows) - self.start + request.tokens
        self.cache = batch_cache(session, self.start, len(self.rows), room)
        self.params = request.params.with_changes(seed=request.seed)
        self.samplers: list[LiveSampler] = []  # made on the first step, once the logits tell the vocabulary
        self.window = self.params.repetition_context_size
        # `_greedy` serves a glance (no candidates asked); with candidates every token gets its statistics
        self.greedy = (self.params.temperature == 0.0 and make_penalties(self.params) is None
                       and not needs_extended(self.params) and self.params.candidates == 0)
        self.eos = set(session.tokenizer.eos_token_ids)

    def run(self, limit: int, stop: Callable[[], bool]) -> None:
        """Read up to `limit` tokens per row; the step for token t+1 is dispatched before token t
        is read, as in `engine.local.turn`, and no step is built that no row would read."""
        fed = mx.array([row.prompt[self.start :] for row in self.rows], dtype=mx.int32)
        history = [row.prompt[: self.start] for row in self.rows]
        pending = self._step(fed, history)
        for count in range(limit):
            if stop():
                return
            upcoming = None
            if count + 1 < limit and not self._all_done():
                upcoming = self._step(pending[0][:, None], [row.prompt + row.ids for row in self.rows])
            self._read(pending[1], count + 1 >= limit)
            if upcoming is None or self._all_done():
                return
            pending = upcoming

    def _step(self, fed: mx.array, history: Sequence[Sequence[int]]) -> tuple[mx.array, mx.array]:
        """Feed (rows, S) ids and sample every row: (tokens (rows,), packed rows (rows, width))."""
        logits = self.session.model(fed, cache=self.cache)[:, -1, :]
        if self.greedy:
            return _greedy(logits)
        if not self.samplers:
            self.samplers = [LiveSampler(logits.shape[-1], self.params, self.params.seed, exp=self.session.sampler_exp,
                                         vocab=self.session.token_vocab)
                             for _ in self.rows]
        tokens, packed = [], []
        for r, sampler in enumerate(self.samplers):
            context = None
            if sampler.uses_context:
                recent = recent_ids(history[r], self.params)  # the penalties' and DRY's window
                context = mx.concatenate([mx.array(recent, dtype=mx.int32), fed[r]])
            token, row = sampler.step(logits[r], context)
            tokens.append(token)
            packed.append(row)
        out = (mx.concatenate(tokens), mx.stack(packed))
        mx.async_eval(*out)
        return out

    def _read(self, packed: mx.array, last: bool) -> None:
        """Read one token per unfinished row (the step's one transfer) and emit it."""
        for number, row, values in zip(self.numbers, self.rows, packed.tolist()):
            if row.reason is not None:
                continue
            if not logits_were_numbers(values):
                raise EngineError("The model produced NaN or infinite logits in a preview; it was stopped.")
            token = int(values[0])
            if token in self.eos:
                row.reason = "stop"
                continue
            text = row.text.add(token)
            row.pieces.append(text)
            stats = self._stats(len(row.ids), token, text, values) if self.params.candidates else None
            self.emit(PreviewToken(number, row.candidate, len(row.ids), token, text, float(values[1]), stats))
            row.ids.append(token)
            if last:
                row.reason = "length"

    def _stats(self, index: int, token: int, text: str, values: list[float]) -> TokenEvent:
        """The token as a reply has it (`engine.local.turn` builds the same from the same row)."""
        stats = LiveSampler.unpack(values, self.params.candidates)
        pieces = self.session.pieces
        return TokenEvent(index, token, text, pieces(token), stats.logprob, stats.sampled_prob, stats.rank,
                          stats.entropy, tuple(Candidate(c, pieces(c), lp, sp) for c, lp, sp in stats.candidates))

    def _all_done(self) -> bool:
        return all(row.reason is not None for row in self.rows)


def _greedy(logits: mx.array) -> tuple[mx.array, mx.array]:
    """Every row's favourite and its log p_raw, (rows,) and (rows, 2), in a handful of nodes: the
    same argmax the sampler takes at temperature 0 without penalties (the first of equal logits),
    for a fraction of k full sampler graphs (entropy, rank and candidates a preview never shows)."""
    x = logits.astype(mx.float32)
    tokens = mx.argmax(x, axis=-1)
    chosen = mx.take_along_axis(x, tokens[:, None], axis=-1) - mx.logsumexp(x, axis=-1, keepdims=True)
    out = (tokens.astype(mx.int32), mx.concatenate([tokens[:, None].astype(mx.float32), chosen], axis=-1))
    mx.async_eval(*out)
    return out
