"""Fitting a request into the model's context, before anything enters the conversation.

A message too long for the context used to be sent, fail, and stay in the history, so every
later turn failed the same way. Here the prompt is counted first (`EngineAPI.count_tokens`, the
template and spliced ids exactly as the turn would render them) and then either fits, or is
shortened by the configured strategy, or is refused with how many tokens it is over.

Strategies (`[chat] context_strategy` in config.toml):

- ``drop_oldest``: leave the oldest exchanges out of the request (never the system prompt, never
  the message being answered) until the prompt fits with room for a reply. The conversation on
  screen keeps them; only the model no longer sees them.
- ``refuse``: never drop anything; a turn that does not fit is refused.

Both front ends (the app's controller and ``logitscope run``) apply the policy through
`fit_turn`, so a chat that the app continues by dropping its oldest exchanges is continued the
same way from a shell (`run --continue` used to send everything and be refused).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Awaitable, Callable, Sequence

from engine.core.api import EngineAPI, Message

STRATEGIES = ("drop_oldest", "refuse")
Count = Callable[[Sequence[Message]], Awaitable[int]]


@dataclass(frozen=True)
class Fit:
    """What to send (`messages`, `dropped` of the oldest left out), or why not (`refusal`)."""

    messages: tuple[Message, ...] = ()
    dropped: int = 0
    refusal: str | None = None
    prompt_tokens: int | None = None  # the length of `messages` where it was counted (`fit_turn`)


def tokens(n: int) -> str:
    return f"{n} token" + ("" if n == 1 else "s")


async def fit(count: Count, messages: Sequence[Message], limit: int, strategy: str, reply_room: int,
              dropped_before: int = 0) -> Fit:
    """`messages` as they may be sent to a model of context `limit`, which needs the prompt
    shorter than `limit` (room for one new token at least). `reply_room`: how many tokens a
    dropping strategy tries to leave for the reply. A `limit` of 0 is unknown (a remote server
    that does not say it): everything is sent, and the server refuses what does not fit.

    `dropped_before`: what the previous turn left out. Leaving out the same again keeps the
    start of the prompt, so the engine's cache is reused; more goes only when that no longer
    fits, and then a quarter of the context at least, so the next turns fit again."""
    messages = tuple(messages)
    if limit <= 0:
        return Fit(messages)
    head = tuple(m for m in messages[:1] if m.role == "system")
    if strategy == "drop_oldest" and 0 < dropped_before < len(messages) - len(head) - 1:
        same = leave_out(messages, dropped_before)
        if same[len(head)].role == "user" and await count(same) < limit:
            return Fit(same, dropped_before)
    total = await count(messages)
    if total < limit:
        return Fit(messages)
    alone = head + messages[-1:]
    if strategy == "drop_oldest" and len(alone) < len(messages):
        kept = await _drop_oldest(count, messages, len(head), limit, max(limit // 4, min(reply_room, limit // 2)))
        if kept is not None:
            return kept
        total = await count(alone)
        return Fit(refusal=_too_long(total, limit, "This message (with the system prompt)"))
    what = "The conversation with this message" if len(alone) < len(messages) else "This message"
    return Fit(refusal=_too_long(total, limit, what))


async def _drop_oldest(count: Count, messages: tuple[Message, ...], head: int, limit: int,
                       room: int) -> Fit | None:
    """Drop whole exchanges from the front (the kept part still starts with a user message) until
    the prompt leaves `room`; accept any fit when nothing more can go. None: nothing fits."""
    body = list(messages[head:])
    dropped = 0
    best: Fit | None = None
    while len(body) > 1:
        body.pop(0)
        dropped += 1
        while len(body) > 1 and body[0].role != "user":
            body.pop(0)
            dropped += 1
        candidate = messages[:head] + tuple(body)
        total = await count(candidate)
        if total < limit:
            best = Fit(candidate, dropped)
            if total < limit - room:
                return best
    return best


async def fit_turn(engine: EngineAPI, messages: Sequence[Message], strategy: str, reply_room: int, *,
                   thinking: bool | None = None, dropped_before: int = 0) -> Fit:
    """`fit` for the next turn on `engine`: its loaded model's context (1 when none is loaded:
    nothing fits, and the caller says why; unknown, 0, when the engine cannot count tokens: the
    server then judges), its own token count as the turn would render the prompt (`thinking` as
    the turn will ask). `reply_room`: the turn's ``max_tokens``."""
    model = engine.model
    limit = (model.context_limit if model.abilities.token_counting else 0) if model else 1

    counted: list[tuple[tuple[Message, ...], int]] = []

    async def count(candidate: Sequence[Message]) -> int:
        tokens = await engine.count_tokens(candidate, thinking=thinking)
        counted.append((tuple(candidate), tokens))
        return tokens

    fitted = await fit(count, messages, limit, strategy, reply_room, dropped_before)
    # The prompt's length, where it was counted: the status bar's "ctx" while the reply streams (#30.7).
    prompt = next((n for sent, n in reversed(counted) if sent == fitted.messages and n > 0), None)
    return replace(fitted, prompt_tokens=prompt)


def left_out_note(dropped: int) -> str:
    """What a front end says when a turn leaves the oldest messages out of the request."""
    return (f"the {dropped} oldest message{'' if dropped == 1 else 's'} of this chat are left out of the request "
            "to fit the context ([chat] context_strategy)")


def leave_out(messages: Sequence[Message], dropped: int) -> tuple[Message, ...]:
    """`messages` without the `dropped` oldest after the system prompt: what a turn that left
    them out sent, so the cache warmed for the next turn is the one it will read."""
    head = 1 if messages and messages[0].role == "system" else 0
    return tuple(messages[:head]) + tuple(messages[head + dropped:])


def _too_long(total: int, limit: int, what: str) -> str:
    fits = limit - 1
    return (f"{what} is {tokens(total - fits)} over the context ({total} of the {fits} that fit): "
            "shorten it, delete or edit messages, or start a new chat.")
