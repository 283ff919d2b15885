"""Warming the cache for the turn a user is about to send.

Why: a conversation that is not in the KV cache (just resumed from disk, another branch flipped
to, a new system prompt) makes its next turn pay the whole history as prefill: seconds on a CPU
for a few thousand tokens of a 0.5B model. That work does not depend on the message the user is
still typing, so the engine can do it while they type, and the turn then costs only its new
message (BENCHMARKS.md: a cached follow-up is ~10x faster than a cold one).

The same holds for the message being typed: a long text pasted in can be read while the question
after it is written. What is prefilled is the part of the prompt that every next user message
starting with the draft shares: the conversation rendered with the draft plus two different
probes, up to where the two renderings part (a draft's last word may still change its tokens).
Nothing here decides correctness: the turn still reuses exactly the ids it shares with the
cache, so a guess that misses (a template that renders earlier messages differently once another
follows) only costs the work. Between chunks the warm-up yields to any command that arrives.
Last, it leaves room in the cache for the message to come (`Session.reserve`), so the turn's
prefill does not have to grow and copy the cache first.
"""

from __future__ import annotations

from typing import Callable, Sequence

import mlx.core as mx

from engine.core.api import MAX_SCORE_CANDIDATES, Message
from engine.local.prompt import common_prefix_len
from engine.local.session import Session

WARM_CHUNK = 256  # tokens per pass: a command arriving meanwhile waits at most one such pass
ROOM = 256  # positions the cache can take after a warm-up without growing inside the next turn
_PROBES = ("a", "Z 9")  # two user messages that share no first character


def shared_prefix(
    session: Session, messages: Sequence[Message], draft: str = "", thinking: bool | None = None
) -> list[int]:
    """The ids the prompt of any next user message that starts with `draft` starts with (empty
    when that cannot be rendered), rendered with the next turn's `thinking` switch."""
    try:
        one, other = (session.prompt((*messages, Message("user", draft + probe)), False, thinking)
                      for probe in _PROBES)
    except Exception:  # noqa: BLE001 - a template refusing the probe (two user messages in a row, say):
        return []  # nothing to foresee; the turn itself will render and report what is wrong
    return one[: common_prefix_len(one, other)]


def warm_cache(
    session: Session, messages: Sequence[Message], should_stop: Callable[[], bool], draft: str = "",
    thinking: bool | None = None, score_candidates: int | None = None,
) -> int:
    """Prefill what the next turn after `messages` will share, with a user message that starts
    with `draft` (what the user has typed so far); returns how many of those ids the cache now
    holds. Stops early (keeping what was fed) when `should_stop()` says so between chunks.

    With `score_candidates` (the next turn scores its prompt: `GenerateRequest.score_candidates`)
    each row's statistics are kept as the turn keeps them (`engine.local.scoring.feed_scored`):
    that turn reads again every cached position without them, so a plain warm-up would be lost."""
    prefix = shared_prefix(session, messages, draft, thinking)
    if len(prefix) >= session.context_limit:  # the turn will be refused anyway, with the reason
        return 0
    kept = session.keep_prefix(prefix)
    with mx.stream(session.stream):
        session.snapshot()  # the last reply's end: a message other than the draft rewinds here (SSM caches)
        if score_candidates is not None and 0 <= score_candidates <= MAX_SCORE_CANDIDATES:
            fed = _feed_scored(session, prefix, score_candidates, should_stop)
        else:
            fed = session.prefill(prefix[kept:], should_stop, chunk=WARM_CHUNK)
        if fed and not should_stop():
            session.reserve(ROOM)
    return common_prefix_len(session.tokens, prefix)


class _Asked:
    """`should_stop` as the flag a score checks between its chunks."""

    def __init__(self, should_stop: Callable[[], bool]) -> None:
        self._should_stop = should_stop

    def is_set(self) -> bool:
        return self._should_stop()


def _feed_scored(session: Session, prefix: list[int], candidates: int, should_stop: Callable[[], bool]) -> bool:
    """`prefix` fed keeping its rows' statistics; False when another command stopped it (what was
    fed stays cached, with its statistics)."""
    from engine.local.scoring import feed_scored_until

    return feed_scored_until(session, prefix, candidates, _Asked(should_stop))[1]
