"""The narrow door between the engine and its callers: plain, frozen data and one protocol.

Everything that crosses between the engine thread and a caller (the TUI, the headless CLI, the
benchmark, tests) is defined here. Only plain Python values cross: ints, floats, strings, tuples.
No `mx.array` ever leaves the engine.

Commands go in as method calls on an `EngineAPI`; events come out of `EngineAPI.generate` as an
async stream of `TokenEvent`s closed by exactly one `TurnFinished` (or an `EngineError` is raised).

The conversation is owned by the caller and sent whole with every request (`GenerateRequest`).
The engine renders it with the model's chat template, finds the longest common token prefix with
what already sits in its KV cache, trims the cache to that prefix and prefills only the rest. So
regenerate, edit-and-resend and branch are all just "send a different conversation": whatever is
shared with the cache is reused, and `TurnFinished.reused_tokens` says how much.

## What the model saw is what it sees (the history rule)

What the model saw when it wrote a reply is what it sees of that reply later: turn k's
`prompt_ids` start with turn k-1's `prompt_ids` followed by its reply's ids (`Message.token_ids`).
Then come the template's own text after the reply (its end-of-turn marker placed right after the
reply, as a model that stops writes it), the new message and the generation prompt. Where a
template renders a reply in the history differently from what the model saw (a leading space,
trimmed whitespace, a stripped thinking block, another role header than its generation prompt),
the engine keeps what the model saw, deliberately: the earlier turns stay in the cache unchanged,
and the model is never conditioned on ids it did not produce after a prompt it was not given. So
a prompt may differ from `apply_chat_template` of the same chat after its first reply; the first
turn's ids are exactly `apply_chat_template(..., tokenize=True)`'s. Text between replies is
tokenized as the whole text would be (no start-of-text ``▁`` of SentencePiece-style tokenizers
in the middle of a prompt). Only an edit, a regenerate or a branch rewinds the cache, and only to
where the new conversation parts from the old one; for caches that cannot be trimmed (SSM and
hybrid models, wrapped sliding windows) the engine restores a snapshot taken at the newest turn
boundaries instead of reading the history again.

## What the probabilities mean (defined once, here)

For every generated token the engine computes, from the model's logits at that position:

- **raw distribution** ``p_raw``: ``softmax(logits after the modifiers)`` at temperature 1, before
  any filter. ``logprob`` values are ``log p_raw`` (natural log). The modifiers (logit bias,
  repetition/presence/frequency penalties, DRY) are part of "raw" because they change what the
  model is asked to predict.
- **sampled distribution** ``p_sampled``: the distribution the token was actually drawn from:
  ``p_raw`` through the filters and the temperature in the chain's order (`SamplingParams.samplers`),
  renormalised. Tokens a filter removed have ``sampled_prob == 0``. At temperature 0 (greedy) it
  is 1 for the argmax and 0 for every other token.
- **rank** of the chosen token: 1 + the number of tokens whose raw logprob is strictly greater
  (rank 1 = the model's favourite).
- **entropy**: ``-sum(p_raw * log p_raw)`` over the whole vocabulary, in nats.
- **candidates**: the top-N tokens by raw logprob, best first (N = ``SamplingParams.candidates``;
  0 turns them off).

The sampling chain: logit bias, then the stages in `SamplingParams.samplers` order (llama.cpp's by
default: penalties, DRY, top-nσ, top-k, typical-p, top-p, min-p, XTC, temperature), then the draw;
mirostat v2 replaces the filters and the draw (docs/sampling.md).

## Text the model reads (scoring, probes, perplexity)

`EngineAPI.score` gives every token of a text the model *reads* (user and system messages, an
edited reply, a plain text) the statistics a generated token has, teacher-forced: the token at
position i is scored from the logits after ``ids[:i]`` (so position 0, with nothing before it, is
not scored). The numbers are those of a generated token with no modifiers and nothing sampled:
``logprob`` is ``log softmax(logits)[id]``, rank and entropy as above over those logits, the
candidates the top-N of the same row; ``sampled_prob`` is None (nothing was drawn there).
`EngineAPI.probe` gives, at one position, the probability of any phrase (the product of its
tokens' teacher-forced probabilities) and its first token's rank, however far outside the top-N.

**Perplexity** of a run of scored tokens is ``exp(-mean logprob)`` over them: per message over the
scored tokens inside that message's span (`MessageScore`), for the chat over every message's
scored tokens (template tokens between messages excluded), for a plain text over every token after
the first. `Abilities.scoring` / `Abilities.probes` say whether an engine can (a server that sends
no prompt logprobs cannot: its `Abilities.why` says so).

## What a remote engine cannot know (None)

`engine.remote.RemoteEngine` reads these numbers from a server (mlx_lm.server, vLLM, llama.cpp),
which sends the chosen token's logprob and its top-N, nothing more. So these fields may be None,
meaning "unknown", never a made-up value (``--json`` writes null, the candidates panel "—"):

- `TokenEvent.sampled_prob` and `Candidate.sampled_prob`: the sampled distribution;
- `TokenEvent.entropy`: it needs the whole vocabulary;
- `TokenEvent.rank`: known only when the chosen token is among the top-N.

The local engine and the scripted one always fill them. A server that names tokens by text only
gives ids of -1 (`engine.remote.events.UNKNOWN_ID`); `TurnFinished.prompt_ids` is empty when the
server rendered the prompt itself (its chat endpoint).
"""

from __future__ import annotations

import asyncio
import math
import threading
from dataclasses import dataclass, field, fields, replace
from typing import AsyncGenerator, Literal, Protocol, Sequence, runtime_checkable

from engine.core.text import typed_value
from engine.core import params as _param_table

Role = Literal["system", "user", "assistant"]
FinishReason = Literal["stop", "length", "cancelled"]


class ParamError(ValueError):
    """An out-of-range or malformed sampling parameter; the message is one line for the user."""


@dataclass(frozen=True)
class SamplingParams:
    """Every knob of the sampling chain. Validated on construction, so a bad value never applies.

    Limits are generous but finite, so a typo is refused instead of silently doing nothing.
    """

    temperature: float = 0.7
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1.0 = off
    min_p: float = 0.0  # 0.0 = off
    repetition_penalty: float = 1.0  # 1.0 = off
    repetition_context_size: int = 64  # window over the whole conversation, cached history included
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None  # None = a fresh random seed per turn
    max_tokens: int = 512
    candidates: int = 10  # top-N alternatives per token; 0 = off
    # The samplers beyond the classic ones, with llama.cpp's names and defaults (`engine.core.params`).
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias); a bias of -100 bans the token
    dry_multiplier: float = 0.0  # 0 = off
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = 64  # -1 = the whole conversation
    dry_sequence_breakers: tuple[str, ...] = ("\n", ":", "\"", "*")
    top_n_sigma: float = 0.0  # 0 = off
    typical_p: float = 1.0  # 1 = off
    xtc_probability: float = 0.0  # 0 = off
    xtc_threshold: float = 0.1  # above 0.5: off
    dynatemp_range: float = 0.0  # 0 = off
    dynatemp_exponent: float = 1.0
    mirostat: int = 0  # 0 = off, 2 = mirostat v2 (replaces the filters and the draw)
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    samplers: tuple[str, ...] = _param_table.LLAMA_CPP_ORDER  # the chain's order (llama.cpp's names)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "seed" and value is None:
                continue
            check = _param_table.BY_NAME[f.name].check
            if check is not None:  # list-valued: its own rules, stored as tuples (hashable, frozen)
                try:
                    object.__setattr__(self, f.name, check(value))
                except ValueError as error:
                    raise ParamError(f"{f.name} {error}") from None
                continue
            low, high, kind = PARAM_LIMITS[f.name]
            if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
                raise ParamError(f"{f.name} must be a whole number, got {_short(value)}")
            if kind is float:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ParamError(f"{f.name} must be a number, got {_short(value)}")
                if isinstance(value, float) and not math.isfinite(value):
                    raise ParamError(f"{f.name} must be a finite number, got {_short(value)}")
            if not low <= value <= high:
                raise ParamError(f"{f.name} must be between {low} and {high}, got {_short(value)}")
        if self.mirostat == 1:
            raise ParamError("mirostat 1 is not offered: 2 is mirostat v2, 0 is off")

    def with_changes(self, **changes: object) -> "SamplingParams":
        """A validated copy with some fields changed (raises `ParamError` on a bad value)."""
        return replace(self, **changes)  # type: ignore[arg-type]


_short = typed_value  # engine.core.text: the one shortener of typed values


# name -> (lowest, highest, type), derived from the one table (`engine.core.params`).
PARAM_LIMITS: dict[str, tuple[float, float, type]] = _param_table.limits()


@dataclass(frozen=True)
class Message:
    """One message of a conversation.

    An assistant message carries `token_ids`: the exact ids that were generated (what the user
    inspected), without the end-of-turn token. The engine splices these ids into the prompt
    instead of re-tokenizing `text`, so an earlier reply is never prefilled again.

    An assistant message's `thinking` is the thinking switch it was written under (see
    `GenerateRequest.thinking`): the generation prompt before it is rendered that way again, so
    switching thinking later never changes what the model saw before an earlier reply.
    """

    role: Role
    text: str
    token_ids: tuple[int, ...] | None = None
    thinking: bool | None = None


def check_token_ids(messages: Sequence[Message], vocab_size: int) -> None:
    """Refuse any carried token id outside ``0..vocab_size-1`` (one EngineError naming the first).

    Why here, before MLX: replies carry their exact ids (from saved or shared files too), and MLX
    indexes the embedding with them unchecked: a too-large id reads garbage or crashes the process.
    """
    for number, message in enumerate(messages, 1):
        for token in message.token_ids or ():
            if type(token) is not int or not 0 <= token < vocab_size:
                raise EngineError(f"Message {number} ({message.role}) holds token id {_short(token)}, "
                                  f"not in 0..{vocab_size - 1} for this model: it cannot be sent.")


@dataclass(frozen=True)
class GenerateRequest:
    """One turn: the whole conversation plus how to continue it.

    With ``continue_last=False`` the last message must be a user (or system) message and the engine
    opens a new assistant reply. With ``continue_last=True`` the last message is a partial
    assistant message (e.g. a branch: the first i tokens of a reply plus a chosen candidate) and
    the engine continues it; token indices in the events then start at ``len(token_ids)``.

    `thinking` switches a reasoning model's ``<think>`` block for the new reply, where the chat
    template has the switch (it mentions ``enable_thinking``; others ignore it): False renders
    the template's "no thinking" generation prompt, None its default. A continued reply keeps
    its own `Message.thinking`.
    """

    messages: tuple[Message, ...]
    params: SamplingParams = field(default_factory=SamplingParams)
    continue_last: bool = False
    thinking: bool | None = None
    # Set (0 to MAX_SCORE_CANDIDATES): the turn's prefill also keeps the teacher-forced statistics
    # of every prompt position it computes, with this many candidates, so a `score` of the chat
    # afterwards reads only the reply again (the prefill then costs what a score does). None: off.
    score_candidates: int | None = None


@dataclass(frozen=True)
class Candidate:
    """One alternative for a position. See the module docstring for the exact definitions."""

    id: int
    text: str
    logprob: float  # log p_raw
    sampled_prob: float | None  # p_sampled (0 when a filter removed it); None: unknown (remote)


@dataclass(frozen=True)
class TokenEvent:
    """One generated token, with everything the inspector shows about it."""

    index: int  # position in the assistant reply, from 0
    id: int
    text: str  # the printable text this token completes (may be "" while a character is split)
    piece: str  # this token alone, decoded for display (may show a partial character as bytes)
    logprob: float  # log p_raw of the chosen token
    sampled_prob: float | None  # p_sampled of the chosen token; None: unknown (remote)
    rank: int | None  # None: unknown (remote, the chosen token not in the top-N)
    entropy: float | None  # None: unknown (remote)
    candidates: tuple[Candidate, ...]


@dataclass(frozen=True)
class TurnFinished:
    """The end of a turn, with the cache bookkeeping and speed of that turn."""

    prompt_ids: tuple[int, ...]  # every token id the model was conditioned on for this turn
    prompt_tokens: int
    reused_tokens: int  # taken from the KV cache
    prefilled_tokens: int  # computed this turn; reused + prefilled == prompt
    generated_tokens: int
    token_ids: tuple[int, ...]  # the reply's ids (continued replies: including the given prefix)
    text: str  # the whole reply's text
    ttft_s: float
    prefill_tps: float
    decode_tps: float
    finish_reason: FinishReason
    context_used: int  # tokens in the cache after the turn
    context_limit: int
    # Parameters changed mid-turn, as the engine applied them: (the reply token index they drew
    # from, the parameters), oldest first. None: the engine does not say (the caller's own record
    # stands). A caller's record can be a token early: a pipelined engine has sampled the next
    # token before the caller sees the last one.
    params_changes: tuple[tuple[int, SamplingParams], ...] | None = None


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


@dataclass(frozen=True)
class LoadProgress:
    """Loading or downloading news while `EngineAPI.load` runs (fraction None = unknown)."""

    message: str
    fraction: float | None = None


@dataclass(frozen=True)
class Abilities:
    """What an engine can do with the loaded model, declared at load so a front end shows or hides
    a feature up front instead of finding out by an error. Each missing ability carries its one
    line of why (`why`), said once where the feature would be."""

    previews: bool = True  # what-if previews (`EngineAPI.preview`)
    branching: bool = True  # continue a reply from a chosen candidate (`GenerateRequest.continue_last`)
    token_counting: bool = True  # `count_tokens` counts exactly; without it the server checks the length
    live_params: bool = True  # a parameter change applies from the next token (else from the next reply)
    warm_up: bool = True  # `prepare` warms the cache for the message being typed
    scoring: bool = True  # `score`: teacher-forced statistics of every token read, perplexity
    probes: bool = True  # `probe`: a phrase's probability at any position
    stage_view: bool = True  # `stages` recomputes each stage's distribution exactly (it needs full logits rows)
    why: tuple[tuple[str, str], ...] = ()  # (ability, the one line saying why it is missing)

    def reason(self, ability: str) -> str:
        """Why `ability` is missing ("" when it is not, or no reason was given)."""
        return dict(self.why).get(ability, "")


@dataclass(frozen=True)
class ModelInfo:
    """What the caller may know about the loaded model."""

    name: str  # a short display name
    path: str  # the local folder it was loaded from
    context_limit: int
    vocab_size: int
    has_chat_template: bool
    parameters: int
    dtype: str  # compute dtype in use, e.g. "float32"
    blas: str = ""  # which BLAS MLX's CPU matmuls use, e.g. "OpenBLAS (2 threads)"
    notes: tuple[str, ...] = ()  # lines to tell the user once after the load (an assumed context limit)
    blas_problem: str = ""  # why the fast BLAS could not be loaded (the missing library, its install command)
    supports_thinking: bool = False  # the chat template has a thinking switch (`GenerateRequest.thinking`)
    abilities: Abilities = Abilities()  # what the engine can do with this model
    opens_thinking: bool = False  # the generation prompt ends inside <think>: replies think from token 0
    drops_past_thinking: bool = False  # the template leaves earlier replies' thinking out of the history
    # the sampling settings the model ships (generation_config.json, GGUF general.sampling.*): (name, value)
    recommended: tuple[tuple[str, object], ...] = ()


class EngineError(Exception):
    """Anything the engine refuses or fails at; the message is one line for the user."""


NO_MODEL = "No model is loaded: load one first."  # what every engine answers before its first load


class ModelLoadError(EngineError):
    """A model that cannot be found, downloaded or loaded."""


class ContextLimitError(EngineError):
    """The conversation does not fit in the model's context (or the configured maximum)."""


EngineEvent = TokenEvent | TurnFinished


@runtime_checkable
class EngineAPI(Protocol):
    """What the TUI and the CLI need from an engine. `engine.local.client.Engine` is the real one;
    `engine.remote.RemoteEngine` the same over an OpenAI-compatible server (some numbers None:
    see the module docstring); `engine.scripted.ScriptedEngine` is the test double that ships beside it."""

    @property
    def model(self) -> ModelInfo | None:
        """The loaded model, or None."""
        ...

    async def load(
        self, model: str, *, trust_remote_code: bool = False, on_progress: "ProgressCallback | None" = None
    ) -> ModelInfo:
        """Load a model by local path or hub id (replacing any loaded one). Raises ModelLoadError."""
        ...

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """Run one turn: yields TokenEvents then exactly one TurnFinished. Raises EngineError.

        Closing the generator (`aclose`, or leaving an `async for` early) cancels the turn."""
        ...

    def preview(self, request: PreviewRequest) -> AsyncGenerator[PreviewEvent, None]:
        """What-if previews (see `PreviewRequest`): PreviewTokens as rows grow, then exactly one
        PreviewFinished. Never changes the cache a turn reuses; gives way to any other command
        within one decode step (its unfinished rows then end "cancelled"). Raises EngineError
        (one line: a bad request, or an engine that cannot preview). Leaving the iteration early
        stops it."""
        ...

    async def score(self, request: ScoreRequest) -> Scored:
        """Teacher-forced statistics of every token `request` reads, with the perplexities (see
        the module docstring). Shares the turn's cache: a history the cache holds is not read
        again, and what is read stays cached for the next turn. Raises EngineError (one line: a
        bad request, a text too long for the context, an engine that cannot score)."""
        ...

    async def probe(self, request: ProbeRequest) -> tuple[ProbeResult, ...]:
        """Each phrase's probability at `request.position` (see `ProbeRequest`), in order.
        Raises EngineError (one line: a bad request or position, an engine that cannot probe)."""
        ...

    async def token_ids(self, text: str) -> tuple[int, ...]:
        """`text` as the loaded model's tokenizer splits it, without special tokens (what a bias by
        text resolves to: one id, or several for a phrase). Raises EngineError (no model, an engine
        with no tokenizer here)."""
        ...

    async def stages(self, request: StageRequest) -> StageView:
        """The stage view of the last of `request.tokens` (see `StageRequest`), queued after any
        running turn. Raises EngineError (one line: a bad request, an engine that has no full
        logits rows to recompute from)."""
        ...

    def prepare(self, messages: Sequence[Message], draft: str = "", thinking: bool | None = None
                ) -> asyncio.Future[int]:
        """Start computing, in the background, the cache the turn after `messages` will reuse (the
        conversation so far, and `draft`, the start of the user message being typed; `thinking`
        that turn's `GenerateRequest.thinking`). Returns at once; a turn or load submitted
        meanwhile waits at most a short chunk. The future, which never fails and may be ignored,
        gives how many of those ids the cache then holds."""
        ...

    async def count_tokens(self, messages: Sequence[Message], thinking: bool | None = None) -> int:
        """How many tokens the prompt for answering `messages` (ending with a user message) takes,
        rendered exactly as the next turn would be (with its `thinking` switch): so a message too
        long for the context is refused before it enters the chat. Raises EngineError (no model,
        a template that fails)."""
        ...

    def set_params(self, params: SamplingParams) -> None:
        """Change sampling parameters now; a running turn applies them from its next token."""
        ...

    def cancel(self) -> None:
        """Stop the running turn within one token; it then finishes with reason "cancelled"."""
        ...

    async def close(self) -> None:
        """Stop and join the engine thread, freeing the model. Idempotent."""
        ...


class ProgressCallback(Protocol):
    def __call__(self, progress: LoadProgress) -> None: ...


@dataclass
class TurnControl:
    """What a caller may change while its turn runs: shared between two threads.

    `params` is replaced whole (never mutated), which is atomic; the decode loop picks up the
    new object before sampling its next token. `cancelled` is checked between tokens.
    """

    params: SamplingParams
    cancelled: threading.Event = field(default_factory=threading.Event)
