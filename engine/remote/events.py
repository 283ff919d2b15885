"""Server records -> our `TokenEvent`s and `TurnFinished`: only what the server said, the rest None.

A server reports the raw logprob of the chosen token and of its top-N (after penalties, before
temperature and filters, on vLLM by default and on mlx_lm.server; llama.cpp reports probabilities
after its samplers unless ``post_sampling_probs`` is false: see docs/remote.md). It never reports the
entropy over the whole vocabulary nor the distribution it sampled from, so those are None, and a
rank is known only when the chosen token is among the top-N.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from engine.core.api import Candidate, FinishReason, TokenEvent, TurnFinished
from engine.remote.wire import TokenRecord

UNKNOWN_ID = -1  # a server that names tokens by text only (see engine.core.api, "Remote engines")

# Byte-level BPE and SentencePiece spell a space and a newline with these in raw vocab pieces
# (mlx_lm.server's top_logprobs are raw pieces): shown as what they stand for.
_PIECE_MARKS = str.maketrans({"Ġ": " ", "▁": " ", "Ċ": "\n", "ĉ": "\t"})


def piece_text(token: str) -> str:
    """A raw vocab piece as readable text (only for display: the reply's text is the server's)."""
    return token.translate(_PIECE_MARKS)


def token_event(index: int, record: TokenRecord, text: str, candidates: int) -> TokenEvent:
    """One token: its text (`text`: what the server's content delta added with it)."""
    chosen = record.id if record.id is not None else UNKNOWN_ID
    listed = tuple(Candidate(a.id if a.id is not None else UNKNOWN_ID, piece_text(a.token), a.logprob, None)
                   for a in record.top[:candidates])
    return TokenEvent(index=index, id=chosen, text=text, piece=piece_text(record.token), logprob=record.logprob,
                      sampled_prob=None, rank=_rank(record), entropy=None, candidates=listed)


def _rank(record: TokenRecord) -> int | None:
    """1 + how many listed tokens beat the chosen one, when it is listed (else unknown: > N)."""
    listed = any((a.id == record.id and a.id is not None) or (a.id is None and a.token == record.token)
                 for a in record.top)
    return 1 + sum(a.logprob > record.logprob for a in record.top) if listed else None


@dataclass
class TurnClock:
    """Client-side timing of one turn (network included: said so in docs/remote.md)."""

    start: float = field(default_factory=time.monotonic)
    first: float | None = None
    last: float | None = None
    whole: bool = False  # the reply came in one response: decode speed is over the whole wait

    def tick(self) -> None:
        now = time.monotonic()
        self.first = now if self.first is None else self.first
        self.last = now

    def ttft(self) -> float:
        return (self.first or time.monotonic()) - self.start

    def decode_tps(self, generated: int) -> float:
        if self.whole:
            return generated / self.ttft() if self.ttft() > 0 else 0.0
        span = (self.last or 0.0) - (self.first or 0.0)
        return (generated - 1) / span if generated > 1 and span > 0 else 0.0


@dataclass(frozen=True)
class TurnOutcome:
    """What one turn produced, for `turn_finished`."""

    prompt_ids: tuple[int, ...]  # () when the server rendered the prompt itself (chat endpoint)
    prompt_tokens: int
    cached_tokens: int
    token_ids: tuple[int, ...]
    generated: int
    text: str
    reason: FinishReason
    context_limit: int


def turn_finished(outcome: TurnOutcome, clock: TurnClock) -> TurnFinished:
    """The closing event; prefill speed is what was not cached over the time to the first token."""
    prefilled = outcome.prompt_tokens - outcome.cached_tokens
    ttft = clock.ttft()
    return TurnFinished(
        prompt_ids=outcome.prompt_ids, prompt_tokens=outcome.prompt_tokens, reused_tokens=outcome.cached_tokens,
        prefilled_tokens=prefilled, generated_tokens=outcome.generated, token_ids=outcome.token_ids,
        text=outcome.text, ttft_s=ttft, prefill_tps=prefilled / ttft if ttft > 0 else 0.0,
        decode_tps=clock.decode_tps(outcome.generated), finish_reason=outcome.reason,
        context_used=outcome.prompt_tokens + len(outcome.token_ids), context_limit=outcome.context_limit,
    )
