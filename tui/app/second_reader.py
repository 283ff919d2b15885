"""A second model that reads the chat beside the one that writes it (issue #33, item 5).

The second model runs in an engine of its own (its own thread, its own cache) and only scores:
it reads the visible path, teacher-forced, and every token of it gets its probability there. The
first model's numbers come from scoring the same path on the first engine (whose cache holds it
already, so that costs little). Both sides' tokens of each message are then aligned by characters
(`engine.core.compare`): a span is a token on each side where the tokenizers agree, or the
stretch of text where they split it differently.

Why a helper the app owns, not part of the controller: the controller runs turns on one engine;
this one never generates, is optional, and is opened, replaced and closed on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from engine.core.api import EngineAPI, EngineError, ModelInfo, ScoreRequest, Scored, TokenEvent
from engine.core.chat.conversation import Conversation, Node
from engine.core.compare import Span, align
from engine.core.memory import available_bytes
from engine.models import why_it_does_not_fit

CANDIDATES = 5  # enough to name each side's first choice


@dataclass
class MessageComparison:
    """One message's spans, and for each of the first model's tokens (by index in the message's
    shown tokens) the span it belongs to."""

    spans: list[Span]
    by_token: dict[int, Span] = field(default_factory=dict)


@dataclass
class Comparison:
    """The whole visible path compared, per node (the system prompt under None). Nodes are
    compared by identity (two messages with the same text are still two)."""

    nodes: list[Node | None]
    compared: list[MessageComparison]  # one per node, in path order
    revision: int  # the conversation's revision it was made for
    perplexity: tuple[float | None, float | None]  # the chat's under the first and the second model

    def of(self, node: Node | None) -> MessageComparison | None:
        return next((c for n, c in zip(self.nodes, self.compared) if n is node), None)

    def at(self, node: Node | None, token: int) -> Span | None:
        message = self.of(node)
        return message.by_token.get(token) if message is not None else None


class SecondReader:
    """Opens, runs and closes the second model; `compare` makes a `Comparison` of the chat."""

    def __init__(self, make_engine: Callable[[], EngineAPI],
                 available: Callable[[], int] = available_bytes) -> None:
        self._make_engine = make_engine
        self._available = available
        self.engine: EngineAPI | None = None
        self.info: ModelInfo | None = None

    @property
    def name(self) -> str:
        return self.info.name if self.info is not None else ""

    async def open(self, spec: str) -> str | None:
        """Load `spec` as the second model (replacing one open already); the one line why not,
        else None. Refused before loading when it would not fit beside the first."""
        if spec.strip().startswith(("http://", "https://")):
            return "Not opened: a server sends no log-probabilities for the text it reads, so it cannot be the second reader."
        too_big = why_it_does_not_fit(spec, self._available())
        if too_big is not None:
            return too_big
        await self.close()
        engine = self._make_engine()
        try:
            info = await engine.load(spec)
        except EngineError as exc:
            await engine.close()
            return f"Not opened: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        abilities = getattr(info, "abilities", None)
        if abilities is not None and not abilities.scoring:
            await engine.close()
            return f"Not opened: {abilities.reason('scoring') or 'this engine cannot score text it reads'}"
        self.engine, self.info = engine, info
        return None

    async def close(self) -> None:
        engine, self.engine, self.info = self.engine, None, None
        if engine is not None:
            await engine.close()

    async def compare(self, first: EngineAPI, first_folder: str | None, conversation: Conversation) -> Comparison:
        """Score the visible path with both models and align them message by message. Raises
        EngineError (one line) when either engine refuses; a chat with no message compares empty."""
        revision = conversation.revision
        if self.engine is None or self.info is None:
            raise EngineError("No second model is open.")
        path = conversation.path()
        if not path:
            return Comparison([], [], revision, (None, None))
        ends_with_reply = path[-1].role == "assistant"
        mine = conversation.messages(model=first_folder)
        # the second model reads every reply as its text, never as ids: ids are one model's (even
        # two engines that name one folder may not share a vocabulary, as the scripted double's don't)
        theirs = tuple(replace(message, token_ids=None) for message in mine)
        a = await first.score(ScoreRequest(mine, candidates=CANDIDATES, continue_last=ends_with_reply))
        b = await self.engine.score(ScoreRequest(theirs, candidates=CANDIDATES, continue_last=ends_with_reply))
        nodes: list[Node | None] = ([None] if conversation.system_prompt else []) + list(path)
        compared = [_message(a, b, k) for k in range(len(nodes))]
        return Comparison(nodes, compared, revision, (a.perplexity, b.perplexity))


def _message(a: Scored, b: Scored, k: int) -> MessageComparison:
    """Message `k`'s tokens on each side (those scored inside its span), aligned; `by_token`
    counts the first model's tokens from the start of the message's span."""
    a_tokens, a_skipped = _tokens_of(a, k)
    b_tokens, _ = _tokens_of(b, k)
    spans = align(a_tokens, b_tokens)
    return MessageComparison(spans, {i + a_skipped: span for span in spans for i in span.a})


def _tokens_of(scored: Scored, k: int) -> tuple[list[TokenEvent], int]:
    """The scored tokens inside message `k`'s span (position p is ``scored.tokens[p - 1]``), and
    how many of its first positions have none (position 0, which nothing precedes)."""
    if k >= len(scored.messages):
        return [], 0
    span = scored.messages[k]
    first = max(span.start, 1)
    return [scored.tokens[p - 1] for p in range(first, span.end)], min(first - span.start, max(span.end - span.start, 0))
