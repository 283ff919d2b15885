"""One turn's data: the messages sent (`Message`, `GenerateRequest`) and what comes back
(`TokenEvent`s with their `Candidate`s, then one `TurnFinished`). The numbers are defined in
`engine.core.api`'s docstring."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

from engine.core.contract.errors import EngineError
from engine.core.contract.params import SamplingParams
from engine.core.text import typed_value as _short

Role = Literal["system", "user", "assistant"]
FinishReason = Literal["stop", "length", "cancelled"]


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
    # What computed the turn, where the engine chose it again since the load (`ModelInfo.blas`'s
    # form: "llama.cpp (1 thread, measured)", the count chosen on the user's replies,
    # `engine.gguf.tuner`); "": as the load said.
    compute: str = ""


EngineEvent = TokenEvent | TurnFinished
