"""Scoring the text a model reads, and probing a phrase at a position (`EngineAPI.score`, `.probe`).

How a score is computed: the ids are rendered as the turn would render them (or tokenized as a
plain text); the session's cache is cut back to what they share with it; positions whose
statistics the session already holds (`Session.scores`, kept beside the cache and dropped with
any position it drops) are taken as they are; from the first position without them, the ids are
fed again in chunks (`engine.local.scorerows.rows_per_chunk`) with the logits of every row, and
each chunk's rows become a few numbers each in numpy, on a side thread while the next chunk's
logits are computed (`engine.local.scorerows`); only those numbers are kept. So a
history the cache holds (scored before) costs nothing, a new message costs its own prefill with
the output head, and the cache afterwards holds the whole text for the next turn.

Exactness: a row's logits are those of an ordinary forward pass over the cached prefix plus the
chunk, the same computation as one pass over the whole text (tests check 1e-4 against mlx-lm and
llama.cpp called directly, cold and from the cache).

A probe reads its phrase on a copy of the cached prefix (`engine.local.preview.batch_cache`: a
slice of MLX's KV buffers, a llama.cpp sequence sharing the chat's cells), so the chat's cache
and its statistics stay as they were.

Runs on the engine thread only (it imports MLX).
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Protocol, Sequence

import mlx.core as mx
import numpy as np

from engine.core.api import (
    Candidate,
    ContextLimitError,
    EngineError,
    MessageScore,
    ProbeRequest,
    ProbeResult,
    Scored,
    ScoreRequest,
    TokenEvent,
    check_probe_request,
    check_score_request,
    perplexity,
)
from engine.core.scorespans import message_spans
from engine.local.preview import _release, _usable, batch_cache
from engine.local.prompt import common_prefix_len
from engine.local.scorerows import RowStats, row_stats, rows_per_chunk
from engine.local.session import Session
from engine.local.textstream import ReplyText

CANCELLED = "Scoring was cancelled."


class Flag(Protocol):
    """What a score checks between chunks (a `threading.Event`; a warm-up's "another command waits")."""

    def is_set(self) -> bool: ...


def score_ids(session: Session, request: ScoreRequest) -> list[int]:
    """The ids `request` reads: the turn's prompt for its messages, or its plain text tokenized
    as the tokenizer does with its special tokens (a BOS where the model adds one)."""
    if request.text is not None:
        plain = getattr(session.tokenizer, "encode_document", None)  # llama.cpp: as llama-perplexity
        ids = list(plain(request.text) if plain is not None else session.tokenizer.encode(request.text))
        bad = next((i for i in ids if not 0 <= i < session.vocab_size), None)
        if bad is not None:
            raise EngineError(f"The tokenizer gave id {bad}, outside this model's {session.vocab_size} embeddings.")
        return ids
    return session.prompt(request.messages, request.continue_last, request.thinking)


def _fits(session: Session, count: int, what: str) -> None:
    if count > session.context_limit:
        raise ContextLimitError(f"{what} is {count} tokens but the context limit is {session.context_limit}: "
                                "shorten it (or score it in parts).")


def run_score(session: Session, request: ScoreRequest, cancelled: threading.Event | None = None) -> Scored:
    """Score `request` on `session` (see the module docstring)."""
    started = time.perf_counter()
    check_score_request(request)
    ids = score_ids(session, request)
    if not ids:
        raise EngineError("There is no text to score: it has no tokens.")
    _fits(session, len(ids), "The text" if request.text is not None else "The conversation")
    with mx.stream(session.stream):
        reused = ensure_scored(session, ids, request.candidates, cancelled)
    tokens = _events(session, ids, request.candidates)
    if request.text is not None:
        return Scored(tuple(ids), tokens, (), perplexity([t.logprob for t in tokens]), reused,
                      time.perf_counter() - started)
    wanted = [m.token_ids if m.token_ids is not None else m.text for m in request.messages]
    spans = message_spans(wanted, ids, [session.pieces.token_bytes(i) for i in ids])
    messages = tuple(_message(number, start, end, tokens) for number, (start, end) in enumerate(spans))
    chat = [t.logprob for m in messages for t in _own(tokens, m.start, m.end)]
    return Scored(tuple(ids), tokens, messages, perplexity(chat), reused, time.perf_counter() - started)


def _own(tokens: tuple[TokenEvent, ...], start: int, end: int) -> tuple[TokenEvent, ...]:
    """The scored tokens of positions start..end-1 (``tokens[j]`` is position j + 1; 0 has none)."""
    return tokens[max(start, 1) - 1:max(end - 1, 0)]


def _message(number: int, start: int, end: int, tokens: tuple[TokenEvent, ...]) -> MessageScore:
    own = [t.logprob for t in _own(tokens, start, end)]
    return MessageScore(number, start, end, len(own), perplexity(own))


def _chunk(session: Session) -> int:
    """Positions per scoring pass: bounded by the logits matrix and by llama.cpp's batch."""
    return min(rows_per_chunk(session.vocab_size), int(getattr(session.model, "batch", 1 << 30)))


def _has(session: Session, position: int, candidates: int) -> bool:
    held = session.scores.get(position)
    return held is not None and held[0] >= candidates


def ensure_scored(session: Session, ids: Sequence[int], candidates: int,
                  cancelled: threading.Event | None = None) -> int:
    """Make the session's cache hold `ids` with statistics for positions 1.. of them (at least
    `candidates` each); returns how many positions were already held."""
    return feed_scored(session, ids, candidates, cancelled)[0]


def feed_scored(session: Session, ids: Sequence[int], candidates: int,
                cancelled: Flag | None = None, on_start: Callable[[int], None] = lambda _: None
                ) -> tuple[int, int]:
    """`ensure_scored`, also saying from which position the ids were fed again: (positions
    whose statistics were held, the cache's length before feeding). Raises EngineError(CANCELLED)
    when `cancelled` is set between chunks (what was fed stays cached and scored); `on_start` is
    told that length first, so a caller knows it even then."""
    keep = session.keep_prefix(ids)
    first = next((p for p in range(1, keep) if not _has(session, p, candidates)), keep)
    if first >= len(ids):  # all held (a text of one token has nothing to score)
        return max(len(ids) - 1, 0), len(ids)
    held = session.scores.get(first - 1)  # its id is fed again, the same: its statistics stay true
    start = session.keep_prefix(ids[:max(first - 1, 0)])  # the row before `first` is fed again
    on_start(start)
    chunk = _chunk(session)
    pending: list[tuple[int, Future[list[RowStats]]]] = []
    try:
        for begin in range(start, len(ids), chunk):
            if cancelled is not None and cancelled.is_set():
                raise EngineError(CANCELLED)
            part = list(ids[begin:begin + chunk])
            targets = np.array(ids[begin + 1:begin + 1 + len(part)])  # the last id of the text has none
            logits = session.rows(part)  # meanwhile the side thread computes the previous chunk's rows
            session.tokens.extend(part)
            if begin == start and held is not None and start == first - 1:
                session.scores[start] = held  # now that its id is in the cache again
            _keep_done(session, pending, candidates)
            pending.append((begin, _side(session).submit(row_stats, logits[:len(targets)], targets, candidates)))
    finally:
        _keep_done(session, pending, candidates, wait=True)  # what was fed is scored, even on a cancel
    return max(first - 1, 0), start


def feed_scored_until(session: Session, ids: Sequence[int], candidates: int, stop: Flag) -> tuple[int, bool]:
    """`feed_scored` for a caller that gives way when `stop` is set (a turn's cancel, a warm-up's
    waiting command): (the cache's length before feeding, whether it finished). What was fed
    stays cached and scored either way."""
    starts = [len(session.tokens)]
    try:
        feed_scored(session, ids, candidates, stop, starts.append)
    except EngineError as stopped:
        if str(stopped) != CANCELLED:
            raise
        return starts[-1], False
    return starts[-1], True


def _side(session: Session) -> ThreadPoolExecutor:
    """The session's statistics thread: a chunk's numpy statistics run there while the engine
    thread computes the next chunk's logits (MLX and llama.cpp release the GIL while they compute,
    numpy while it works on whole rows)."""
    pool = getattr(session, "stats_pool", None)
    if pool is None:
        pool = session.stats_pool = ThreadPoolExecutor(1, thread_name_prefix="logitscope-scores")
    return pool


def _keep_done(session: Session, pending: list[tuple[int, Future[list[RowStats]]]], candidates: int,
               wait: bool = False) -> None:
    """Store the statistics of the finished chunks, in order (all of them with `wait`)."""
    while pending and (wait or pending[0][1].done()):
        begin, future = pending.pop(0)
        for offset, stats in enumerate(future.result()):
            if math.isnan(stats.logprob) or math.isnan(stats.entropy):
                pending.clear()
                session.reset_cache()
                raise EngineError("The model produced NaN logits while scoring: its weights may be damaged, "
                                  'or its dtype overflows (try compute_dtype = "float32").')
            session.scores[begin + 1 + offset] = (candidates, stats)


def _events(session: Session, ids: Sequence[int], candidates: int) -> tuple[TokenEvent, ...]:
    """Each scored position as a TokenEvent (its text as a reply's stream would show it)."""
    text = ReplyText(session.tokenizer)
    text.add(ids[0])
    pieces = session.pieces
    events = []
    for position in range(1, len(ids)):
        token = ids[position]
        stats: RowStats = session.scores[position][1]
        events.append(TokenEvent(
            index=position, id=token, text=text.add(token), piece=pieces(token), logprob=stats.logprob,
            sampled_prob=None, rank=stats.rank, entropy=stats.entropy,
            candidates=tuple(Candidate(cid, pieces(cid), lp, None) for cid, lp in stats.candidates[:candidates]),
        ))
    return tuple(events)


def run_probe(session: Session, request: ProbeRequest) -> tuple[ProbeResult, ...]:
    """Each phrase's probability at `request.position`, read on a copy of the cached prefix."""
    check_probe_request(request)
    ids = score_ids(session, request.context)
    if request.position > len(ids):
        raise EngineError(f"Probe position {request.position} is past the text's {len(ids)} tokens.")
    before = ids[:request.position]
    with mx.stream(session.stream):
        return tuple(_probe(session, before, phrase) for phrase in request.phrases)


def _probe(session: Session, before: list[int], phrase: str) -> ProbeResult:
    """One phrase after `before`: fed after the longest prefix the cache can give as it is."""
    phrase_ids = session.encode.continued(phrase)
    if not phrase_ids:
        raise EngineError(f"The probe {phrase[:40]!r} has no tokens.")
    _fits(session, len(before) + len(phrase_ids), "The text with the probe")
    bad = next((i for i in phrase_ids if not 0 <= i < session.vocab_size), None)
    if bad is not None:
        raise EngineError(f"The probe's token {bad} is outside this model's {session.vocab_size} embeddings.")
    start = _usable(session, min(common_prefix_len(session.tokens, before), len(before) - 1))
    fed = before[start:] + phrase_ids[:-1]
    cache = batch_cache(session, start, 1, len(fed))
    try:
        stats: list[RowStats] = []
        chunk = _chunk(session)
        wanted_from = len(before) - 1 - start  # the row after before[-1] is the first one read
        for begin in range(0, len(fed), chunk):
            part = fed[begin:begin + chunk]
            logits = session.rows(part, cache)
            lo = max(wanted_from - begin, 0)
            if lo < len(part):
                targets = phrase_ids[begin + lo - wanted_from:begin + len(part) - wanted_from]
                stats.extend(row_stats(logits[lo:], np.array(targets), 0))
    finally:
        _release(cache)
    logprobs = tuple(s.logprob for s in stats)
    return ProbeResult(phrase, tuple(phrase_ids), tuple(session.pieces(i) for i in phrase_ids), logprobs,
                       math.fsum(logprobs), stats[0].rank)
