"""The scope's requests and answers beyond a turn: what-if previews, teacher-forced scores of
text the model reads (with perplexity), probes of a phrase, and the stage view of one token.
Defined in `engine.core.api`'s docstring ("Text the model reads")."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from engine.core.contract.errors import EngineError
from engine.core.contract.params import SamplingParams
from engine.core.contract.turns import FinishReason, GenerateRequest, Message, TokenEvent
from engine.core.text import typed_value as _short


@dataclass(frozen=True)
class PreviewRequest:
    """What-if previews: where each of `candidates` would lead if chosen next in the last reply.

    `messages` ends with the partial assistant reply, its exact ids (`token_ids`) being the reply's
    first ``position`` tokens. Each row is exactly the turn a branch would run: the same messages
    with the candidate appended to the reply, `continue_last=True`, `params` with their `tokens`
    as max_tokens and `seed` (the fixed seed every row draws with, so previews are reproducible).
    With `params.candidates` 0 (the default) a row is a glance, its ids and log p only; above 0
    each token carries every statistic its branch's token has (`PreviewToken.stats`).
    """

    messages: tuple[Message, ...]
    candidates: tuple[int, ...]
    tokens: int = 12
    params: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=0.0, candidates=0))
    seed: int = 0

    def branch(self, candidate: int) -> GenerateRequest:
        """The real turn that a preview of `candidate` equals (its TokenEvents are the preview)."""
        last = self.messages[-1]
        ids = tuple(last.token_ids or ()) + (candidate,)
        params = self.params.with_changes(max_tokens=self.tokens, seed=self.seed)
        return GenerateRequest(self.messages[:-1] + (Message(last.role, last.text, ids, last.thinking),), params, True)


@dataclass(frozen=True)
class PreviewToken:
    """One token of one preview row, as it streams."""

    row: int  # index into PreviewRequest.candidates
    candidate: int  # that candidate's id
    index: int  # position in the preview, from 0 (the token after the candidate)
    id: int
    text: str  # the printable text this token completes (as `TokenEvent.text`)
    logprob: float  # log p_raw
    # Every statistic of the token, when the request's params ask for candidates (> 0): a branch
    # that starts from this preview keeps them, so none of its tokens is second-class (#30.2).
    stats: TokenEvent | None = None


@dataclass(frozen=True)
class Preview:
    """One finished preview row: the ids a branch at `candidate` would write next."""

    candidate: int
    token_ids: tuple[int, ...]
    text: str
    finish_reason: FinishReason  # "cancelled": cut short (a real command came first, or cancel)


@dataclass(frozen=True)
class PreviewFinished:
    """The end of a preview command: every row, in `PreviewRequest.candidates` order."""

    previews: tuple[Preview, ...]
    seconds: float


PreviewEvent = PreviewToken | PreviewFinished


MAX_SCORE_CANDIDATES = 64  # top-N per scored token: a panel shows a handful, the rows stay small


@dataclass(frozen=True)
class ScoreRequest:
    """What to score: the prompt a turn would render for `messages` (its template, the replies as
    their exact ids, `continue_last` and `thinking` as in `GenerateRequest`), or, with `text`
    set (and no messages), that plain text alone, tokenized as the model's tokenizer does with
    its special tokens (a BOS where the model adds one; `logitscope score`). A chat that ends
    with a reply is scored with ``continue_last=True`` (the reply's ids, no end-of-turn marker
    after them); one that ends with a user message reads the generation prompt after it.

    `candidates`: the top-N listed per token (0 to `MAX_SCORE_CANDIDATES`)."""

    messages: tuple[Message, ...] = ()
    text: str | None = None
    candidates: int = 10
    continue_last: bool = False
    thinking: bool | None = None


@dataclass(frozen=True)
class MessageScore:
    """Where one message's own text sits in `Scored.ids`, and its perplexity there.

    The span covers the tokens that hold the message's text (not its template role header);
    ``start == end`` when the template does not show the text verbatim (nothing is scored)."""

    message: int  # index into ScoreRequest.messages
    start: int  # first position in Scored.ids
    end: int  # one past the last
    scored: int  # how many of its positions have statistics (position 0 has none)
    perplexity: float | None  # exp(-mean logprob) over them; None when none


@dataclass(frozen=True)
class Scored:
    """The statistics of every token read, teacher-forced (see the module docstring).

    ``tokens[j]`` is the token at position ``j + 1`` of `ids` (``TokenEvent.index`` says the
    position; its `text` and `piece` are this token alone, made printable; `sampled_prob` is
    None for the token and its candidates: nothing was drawn)."""

    ids: tuple[int, ...]  # every id the model read, in order
    tokens: tuple[TokenEvent, ...]  # positions 1 .. len(ids) - 1
    messages: tuple[MessageScore, ...]  # one per ScoreRequest.messages entry (empty for a plain text)
    perplexity: float | None  # the chat's (over every message's scored tokens) or the plain text's
    reused_tokens: int  # positions whose statistics the engine already held (cached history)
    seconds: float


@dataclass(frozen=True)
class ProbeRequest:
    """Phrases to probe at one position of what `context` reads: each phrase is read as if it
    stood at `position` of `score(context).ids` (after ``ids[:position]``, 1 <= position <=
    len(ids)), tokenized as it would be in place there (so " cat", with its space, is a
    different probe from "cat")."""

    context: ScoreRequest
    position: int
    phrases: tuple[str, ...]


@dataclass(frozen=True)
class ProbeResult:
    """One phrase's probability at the probed position, teacher-forced token by token."""

    phrase: str
    ids: tuple[int, ...]  # the phrase's tokens
    pieces: tuple[str, ...]  # each of them alone, made printable
    logprobs: tuple[float, ...]  # log p_raw of each token given the context and the tokens before it
    logprob: float  # their sum: log of the phrase's probability
    first_rank: int  # 1 + the number of tokens strictly more likely than its first token there


def perplexity(logprobs: Sequence[float]) -> float | None:
    """exp(-mean logprob) over `logprobs`, None for none (the one definition every engine uses).
    An impossible token (-inf) makes it infinite."""
    if not logprobs:
        return None
    mean = -math.fsum(logprobs) / len(logprobs)
    return math.inf if mean > 700 else math.exp(mean)


def check_score_request(request: ScoreRequest) -> None:
    """Refuse a malformed score request in one line (every engine calls this first)."""
    if type(request.candidates) is not int or not 0 <= request.candidates <= MAX_SCORE_CANDIDATES:
        raise EngineError(f"A score lists 0 to {MAX_SCORE_CANDIDATES} candidates per token, "
                          f"got {_short(request.candidates)}.")
    if request.text is not None:
        if request.messages:
            raise EngineError("Score either a conversation or a plain text, not both.")
        if not request.text:
            raise EngineError("There is no text to score: it is empty.")
    elif not request.messages:
        raise EngineError("There is nothing to score: the conversation is empty.")


def check_probe_request(request: ProbeRequest) -> None:
    """Refuse a malformed probe request in one line (the position is checked against the ids)."""
    check_score_request(request.context)
    if not request.phrases:
        raise EngineError("A probe needs at least one phrase.")
    for phrase in request.phrases:
        if not isinstance(phrase, str) or not phrase:
            raise EngineError("A probe phrase must be some text, not empty.")
    if type(request.position) is not int or request.position < 1:
        raise EngineError(f"A probe position is 1 or more, got {_short(request.position)}.")


@dataclass(frozen=True)
class StageRequest:
    """The stage view of one token (`EngineAPI.stages`): what each stage of the chain did to it.

    `messages` and `continue_last` are the turn that drew the token, as it was sent (a fresh reply:
    ending with the user message; a branch: ending with the partial reply it continued); `tokens`
    are the ids that turn drew, up to and including the token shown (the last one); `params` the
    ones it started with (their seed is the turn's), `changes` the mid-turn changes ((index into
    `tokens`, params from there on), `Version.changes` shifted to the turn's start). `candidates`
    are the ids the view lists (the stored token's candidates and the chosen one)."""

    messages: tuple[Message, ...]
    tokens: tuple[int, ...]
    params: SamplingParams
    candidates: tuple[int, ...]
    changes: tuple[tuple[int, SamplingParams], ...] = ()
    continue_last: bool = False
    thinking: bool | None = None


@dataclass(frozen=True)
class StageView:
    """Each stage in force for one token, with every listed candidate's probability after it.

    Recomputed, not recorded (a turn keeps no logits row): the engine runs the model again over the
    prompt and the reply up to the token, then the turn's chain with its parameters, seed and
    state (`engine.local.stageview`); a replay that does not draw the stored token is refused
    (EngineError), never shown. `logprobs` are the recomputed log p_raw of `candidates`, so a caller compares them with the
    stored ones before trusting the table (float rounding of a batched forward pass: ~1e-6)."""

    candidates: tuple[int, ...]
    stages: tuple[tuple[str, tuple[float, ...]], ...]  # ("model", probs), each stage in force, ("final", probs)
    removed_by: tuple[str, ...]  # per candidate: the stage that removed it; "" where it survived
    token: int  # the token shown (the replay drew it)
    logprobs: tuple[float, ...]  # recomputed log p_raw per candidate
