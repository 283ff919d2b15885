"""One turn: render, reuse the cache, prefill the new suffix, then the pipelined decode loop.

The loop mirrors mlx-lm's `generate_step`: the step for token t+1 is built and handed to
`mx.async_eval` *before* token t is read, so the device computes while Python builds the event.
That means every token read has already been fed to the model, which `Session.tokens` records,
keeping the id list equal to the cache offset. Two exceptions: the first token is read before its
step is built (see `_DecodeLoop.run`), so a first token that is a stop token is never fed; and the
turn's last allowed token (max_tokens, context limit) is never fed either, since no step would use
it: the next turn prefills it with its own suffix.

Per token there is exactly one device-to-host transfer: the sampler's packed row (`.tolist()`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol, cast

import mlx.core as mx

from engine.core.api import (
    Candidate,
    ContextLimitError,
    EngineError,
    FinishReason,
    GenerateRequest,
    SamplingParams,
    TokenEvent,
    TurnControl,
    TurnFinished,
)
from engine.local.chain import recent_ids
from engine.local.prompt import message_ids
from engine.local.sampling import LiveSampler, TokenStats, logits_were_numbers
from engine.local.session import Session
from engine.local.textstream import ReplyText


class PendingToken(Protocol):
    """A sampled token on its way: `token` is what the next step feeds (an MLX array here, an
    int in the GGUF engine), `read` returns its packed statistics row (`engine.local.sampling`)."""

    token: Any
    candidates: int
    params: SamplingParams  # what it was sampled with (`TurnFinished.params_changes`)

    def read(self) -> list[float]: ...


class Decoder(Protocol):
    """Feeds ids to the model and samples the next token (`_Decoder`; the GGUF engine's
    `engine.gguf.decoder.OverlappedDecoder`, chosen by `Session.decoder_factory`)."""

    def step(self, fed: Any) -> PendingToken: ...


@dataclass
class _Pending:
    """A sampled token not yet read back: its id (1,), its packed statistics row, and how many
    candidates the parameters it was sampled with asked for (parameters may change meanwhile)."""

    token: mx.array
    row: mx.array
    candidates: int
    params: SamplingParams

    def read(self) -> list[float]:
        """The row as Python floats: the turn's one device-to-host transfer per token."""
        return cast("list[float]", self.row.tolist())  # a 1-D array's tolist() is a flat list


class _Decoder:
    """Feeds ids and samples with the live parameters."""

    def __init__(self, session: Session, control: TurnControl) -> None:
        """The sampler is made on the first step, once the logits tell the vocabulary size."""
        self.session = session
        self.control = control
        self.params = control.params
        self.sampler: LiveSampler | None = None

    def step(self, fed: mx.array) -> _Pending:
        """Feed `fed` and sample the next token from the resulting logits (lazily, then async)."""
        logits = self.session.forward(fed)
        params = self.control.params
        if self.sampler is None:
            self.sampler = LiveSampler(logits.shape[-1], params, params.seed, exp=self.session.sampler_exp,
                                       vocab=self.session.token_vocab)
        elif params is not self.params:
            self.sampler.set_params(params)
        self.params = params
        token, row = self.sampler.step(logits, self._context(fed, params))
        mx.async_eval(token, row)
        return _Pending(token, row, params.candidates, params)

    def _context(self, fed: mx.array, params: SamplingParams) -> mx.array | None:
        """The ids the penalties look back over: the recorded ids plus `fed`, the ids being fed.

        `session.tokens` holds every id fed before `fed` (an id is recorded once read back), so
        this is the conversation's tail, cached history included. Built only when a penalty is
        on: with none, the hot path skips it.
        """
        assert self.sampler is not None
        if not self.sampler.uses_context:
            return None
        recent = recent_ids(self.session.tokens, params)  # the penalties' and DRY's window
        return mx.concatenate([mx.array(recent, dtype=mx.int32), fed])  # the penalties keep the window


def run_turn(
    session: Session, request: GenerateRequest, control: TurnControl, emit: Callable[[TokenEvent], None]
) -> TurnFinished:
    """Generate one reply, emitting a TokenEvent per token; returns the closing TurnFinished."""
    started = time.perf_counter()
    prompt = session.prompt(request.messages, request.continue_last, request.thinking)
    _check_fits(len(prompt), session.context_limit)
    prefix = message_ids(session.encode, request.messages[-1]) if request.continue_last else []
    reused = session.reuse_prefix(prompt)
    suffix = prompt[reused:]
    loop = _DecodeLoop(session, control, prefix, len(prompt), emit)
    with mx.stream(session.stream):
        session.snapshot()  # where this turn starts: an edit of its message rewinds here (SSM caches)
        before, last = session.split_prompt(suffix)
        if request.score_candidates is not None:  # the prefill keeps every row's statistics
            reused, scored = _scored_prefill(session, prompt, request.score_candidates, control, reused)
            before, last = (), prompt[-1:]
            if not scored:
                session.check()
                return loop.finished(prompt, reused, started, "cancelled", fed=len(session.tokens) - reused)
        if not session.prefill(before, control.cancelled.is_set):
            session.check()
            return loop.finished(prompt, reused, started, "cancelled", fed=len(session.tokens) - reused)
        session.snapshot()  # where its reply starts: a regenerate or a branch rewinds here
        decoder: Decoder = (session.decoder_factory or _Decoder)(session, control)
        pending = decoder.step(mx.array(list(last), dtype=mx.int32))
        session.tokens.extend(last)
        reason = loop.run(decoder, pending)
    session.check()
    return loop.finished(prompt, reused, started, reason)


def _scored_prefill(session: Session, prompt: list[int], candidates: int, control: TurnControl,
                    reused: int) -> tuple[int, bool]:
    """Prefill all but the prompt's last id keeping each row's statistics (`engine.local.scoring`;
    cached positions without them are read again, so `reused` may shrink); returns (reused,
    finished without a cancel)."""
    from engine.core.api import MAX_SCORE_CANDIDATES
    from engine.local.scoring import feed_scored_until

    if not 0 <= candidates <= MAX_SCORE_CANDIDATES:
        raise EngineError(f"A scoring turn lists 0 to {MAX_SCORE_CANDIDATES} candidates per token, got {candidates}.")
    start, finished = feed_scored_until(session, prompt[:-1], candidates, control.cancelled)
    return min(reused, start), finished


def _check_fits(prompt_tokens: int, limit: int) -> None:
    """A prompt must leave room for at least one new token."""
    if prompt_tokens >= limit:
        raise ContextLimitError(
            f"The conversation is {prompt_tokens} tokens but the context limit is {limit}: "
            "remove or shorten messages, or start a new conversation."
        )


class _DecodeLoop:
    """The token loop of one turn and what it measured."""

    def __init__(
        self,
        session: Session,
        control: TurnControl,
        prefix: list[int],
        prompt_len: int,
        emit: Callable[[TokenEvent], None],
    ) -> None:
        """`prefix`: the ids a continued reply already has; `prompt_len` counts toward the limit."""
        self.session = session
        self.control = control
        self.emit = emit
        self.prompt_len = prompt_len
        self.reply = list(prefix)
        self.new = 0
        self.text = ReplyText(session.tokenizer, prefix)
        self.eos = set(session.tokenizer.eos_token_ids)
        self.reads = 0  # tokens read back, stop token included
        self.unfed = 0  # 1 when the turn's last token was read but never fed (the cache lacks it)
        self.first_at: float | None = None
        self.last_at = 0.0
        self.drawn_with = control.params  # the parameters the latest token was sampled with
        self.changes: list[tuple[int, SamplingParams]] = []  # where they changed, as applied
        self.prefill_started = time.perf_counter()  # created right before the prefill

    def run(self, decoder: Decoder, pending: PendingToken) -> FinishReason:
        """Read tokens until a stop token, max_tokens, the context limit, or a cancel.

        From the second token on, the step that feeds a token is dispatched before the token is
        read (pipelining). The first token is read and shown *before* its step is built: on a
        CPU, `mx.async_eval` runs most of a step before it returns, so dispatching first would
        add a whole decode step to the time to first token.

        The last token the limits allow is not fed at all: its step would be computed in the
        background after the turn ends and delay the next turn's first token by a decode step
        (measured: 2.5 ms on the 2M bench model, 8 ms on the 30M one), for keys and values the
        next turn can compute inside its prefill for a fraction of that.
        """
        upcoming: PendingToken | None = None
        first = True
        while True:
            if self.control.cancelled.is_set():
                return "cancelled"
            last = self._last_allowed()  # a token that ends the turn is never fed: nothing would use it
            if not first and not last:
                upcoming = decoder.step(pending.token)  # feeds the pending token: pipelining
            row = pending.read()
            if not logits_were_numbers(row):
                raise self._not_numbers()
            token = int(row[0])
            self._tick()
            fed = not first and not last
            if token in self.eos:
                if fed:  # the cache holds it
                    self.session.tokens.append(token)
                return "stop"
            if pending.params is not self.drawn_with:
                if pending.params != self.drawn_with:
                    self.changes.append((len(self.reply), pending.params))
                self.drawn_with = pending.params
            self.emit(self._event(token, LiveSampler.unpack(row, pending.candidates)))
            if first and not last:  # the first token, fed now that it is on its way to the screen
                upcoming = decoder.step(pending.token)
                fed = True
            if fed:
                self.session.tokens.append(token)
            else:
                self.unfed = 1
            self.reply.append(token)
            self.new += 1
            if last:
                return "length"
            assert upcoming is not None
            pending, first = upcoming, False

    def _not_numbers(self) -> EngineError:
        """The error that ends a turn whose logits hold NaN or +inf: no such token is ever shown
        (its logprob would be NaN) and the cache, computed from the same numbers, is dropped."""
        self.session.reset_cache()
        return EngineError(
            f"The model produced NaN or infinite logits (reply token {len(self.reply)}); the turn was stopped: "
            'its weights may be damaged, or its dtype overflows (try compute_dtype = "float32").'
        )

    def _last_allowed(self) -> bool:
        """The token about to be read is the turn's last: max_tokens (read live: it may change
        mid-turn) or the context limit leaves no room for another."""
        after = self.new + 1
        return after >= self.control.params.max_tokens or self.prompt_len + after >= self.session.context_limit

    def _tick(self) -> None:
        """Note when a token was read (for time-to-first-token and decode speed)."""
        self.reads += 1
        now = time.perf_counter()
        if self.first_at is None:
            self.first_at = now
        self.last_at = now

    def _event(self, token: int, stats: TokenStats) -> TokenEvent:
        """The event for one token, built from its unpacked statistics."""
        pieces = self.session.pieces
        return TokenEvent(
            index=len(self.reply),
            id=token,
            text=self.text.add(token),
            piece=pieces(token),
            logprob=stats.logprob,
            sampled_prob=stats.sampled_prob,
            rank=stats.rank,
            entropy=stats.entropy,
            candidates=tuple(Candidate(cid, pieces(cid), lp, sp) for cid, lp, sp in stats.candidates),
        )

    def finished(
        self, prompt: list[int], reused: int, started: float, reason: FinishReason, fed: int | None = None
    ) -> TurnFinished:
        """The closing record: cache bookkeeping and speeds. `fed`: prompt ids actually prefilled,
        when a cancel stopped the prefill early (else the whole new part of the prompt)."""
        first_at = self.first_at if self.first_at is not None else time.perf_counter()
        prefill_s = max(first_at - self.prefill_started, 1e-9)
        decode_s = self.last_at - first_at
        prefilled = len(prompt) - reused if fed is None else fed
        return TurnFinished(
            prompt_ids=tuple(prompt),
            prompt_tokens=len(prompt),
            reused_tokens=reused,
            prefilled_tokens=prefilled,
            generated_tokens=self.new,
            token_ids=tuple(self.reply),
            text=self.text.finish(),
            ttft_s=first_at - started,
            prefill_tps=prefilled / prefill_s,
            decode_tps=(self.reads - 1) / decode_s if self.reads > 1 and decode_s > 0 else 0.0,
            finish_reason=reason,
            context_used=len(self.session.tokens) + self.unfed,
            context_limit=self.session.context_limit,
            params_changes=tuple(self.changes),
        )
