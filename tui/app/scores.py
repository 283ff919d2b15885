"""The chat's own text scored (#33.1-3): every token the model reads, teacher-forced, so the
cursor, the candidates panel and the heatmap work inside the user's and the system's messages,
and each message (and the chat) has its perplexity.

Why a helper beside the controller, as `Previews` is: scoring is a second, optional conversation
with the engine (`EngineAPI.score`) with its own timing (asked once the chat rests: after a turn,
a flip, a new system prompt; never while a reply streams) and its own memory. A result is kept
per message *version* (a node shows one of its versions; the one shown is what was scored), as
long as what it was computed from holds: the same model, system prompt and past-thinking choice
(`context`); anything else drops the lot.

A message's tokens are `Scored.tokens` inside its span, re-indexed from 0 like a reply's, and
shown as tokens only when they spell the message (`spell`: the user's text is what shows, never
a tokenizer's rendering of it; a template that rewrites the text, or a first token with nothing
before it to score it, leaves the message as plain text).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from textual.message import Message as TextualMessage

from engine.core.api import EngineAPI, EngineError, Message, ProbeRequest, ProbeResult, Scored, ScoreRequest, TokenEvent
from engine.core.chat.conversation import Node, Version

Post = Callable[[TextualMessage], object]
DELAY_S = 0.3  # how long the chat rests before it is scored (a burst of changes asks once)


@dataclass(frozen=True)
class MessageTokens:
    """One message version's scored tokens and perplexity. `start`, `length`: where its tokens
    sit in what the model read (a probe at local index i asks at `start + i`); `tokens` is
    empty for a reply (it has its own) and when they do not spell the text (then the message
    shows as plain text)."""

    tokens: tuple[TokenEvent, ...]
    perplexity: float | None
    start: int
    length: int


@dataclass(eq=False)
class ScoresChanged(TextualMessage):
    """New scores (or none: `problem` says why, once)."""

    problem: str = ""


class ChatScores:
    """Owns the score requests of one screen: timing, the running task, the results."""

    def __init__(self, engine: EngineAPI, post: Post, enabled: bool = True, candidates: int = 10) -> None:
        self.engine = engine
        self.enabled = enabled
        self.candidates = candidates
        self._post = post
        self._by_version: dict[int, tuple[Version, MessageTokens]] = {}
        self._context: object = None
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self.request: ScoreRequest | None = None  # what the results were computed from
        self.perplexity: float | None = None  # the whole chat's, from the latest result
        self.problem = ""

    def why_not(self) -> str:
        """Why this engine cannot score ("" when it can)."""
        model = self.engine.model
        if model is not None and not model.abilities.scoring:
            return model.abilities.reason("scoring") or "This engine cannot score the text it reads."
        return ""

    def of(self, version: Version) -> MessageTokens | None:
        """The scores of `version` (None: not scored, or scored under another context)."""
        entry = self._by_version.get(id(version))
        return entry[1] if entry is not None and entry[0] is version else None

    def tokens(self, node: Node) -> list[TokenEvent]:
        """The tokens the cursor walks in `node`: a reply's own, else its scored ones."""
        if node.role == "assistant":
            return node.version.tokens or []
        scored = self.of(node.version)
        return list(scored.tokens) if scored is not None else []

    def ask(self, messages: Sequence[Message], nodes: Sequence[Node], context: object) -> None:
        """Score `messages` (one per node of `nodes`, in order) once the chat rests. A changed
        `context` (model, system prompt, past thinking) forgets every earlier result."""
        if context != self._context:
            self._context = context
            if self.request is not None:  # what is shown was read under the old context: it goes now
                self.forget()
                self._post(ScoresChanged())
        self.stop()
        if not self.enabled or not messages or self.why_not():
            return
        # A chat that ends with a reply is read as that reply continued (its own tokens, no
        # turn's end after them): the engine renders no generation prompt after a reply.
        request = ScoreRequest(tuple(messages), candidates=self.candidates,
                               continue_last=messages[-1].role == "assistant")
        if request == self.request:
            return  # scored already
        self._timer = asyncio.get_running_loop().call_later(DELAY_S, self._start, request, tuple(nodes))

    def stop(self) -> None:
        """Cancel the pending ask and the running score (a turn starts: the engine is its)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None

    def forget(self) -> None:
        self.stop()
        self._by_version.clear()
        self.request, self.perplexity = None, None

    def _start(self, request: ScoreRequest, nodes: tuple[Node, ...]) -> None:
        self._timer = None
        self._task = asyncio.create_task(self._run(request, nodes))

    async def _run(self, request: ScoreRequest, nodes: tuple[Node, ...]) -> None:
        try:
            scored = await self.engine.score(request)
        except EngineError as exc:
            self.problem = str(exc)
            self._post(ScoresChanged(self.problem))
            return
        self._keep(request, nodes, scored)
        self._post(ScoresChanged())

    def _keep(self, request: ScoreRequest, nodes: tuple[Node, ...], scored: Scored) -> None:
        self.request, self.perplexity = request, scored.perplexity
        self._by_version.clear()  # the path shown now: other branches' are read again when shown
        for span, node in zip(scored.messages, nodes):
            own = scored.tokens[max(span.start - 1, 0):max(span.end - 1, 0)]
            length = span.end - span.start
            spelled = spell(own, request.messages[span.message].text) if len(own) == length else None
            tokens = () if node.role == "assistant" or spelled is None else spelled
            self._by_version[id(node.version)] = (node.version, MessageTokens(tokens, span.perplexity, span.start, length))

    async def probe(self, node: Node, index: int, phrase: str) -> ProbeResult:
        """`phrase`'s probability in place of token `index` of `node` (scored already), teacher-
        forced after everything before it. Raises EngineError (one line)."""
        scored = self.of(node.version)
        if scored is None or self.request is None:
            raise EngineError("This message is not scored yet: wait a moment and ask again.")
        if node.role == "assistant" and scored.length != len(node.version.tokens or ()):
            raise EngineError("This reply is read back in other tokens than it was written in: no probe here.")
        position = scored.start + index
        [result] = await self.engine.probe(ProbeRequest(self.request, position, (phrase,)))
        return result


def spell(tokens: Sequence[TokenEvent], text: str) -> tuple[TokenEvent, ...] | None:
    """`tokens` re-indexed from 0, each shown with exactly the part of `text` it covers: the
    white space a token's text skips (a space a tokenizer folds into a word's marker, say) goes
    with the token after it, what follows the last token with that one. None when the tokens'
    texts are not found in order in `text` with only white space between them (then the text
    shows as it is, not as tokens)."""
    out: list[TokenEvent] = []
    at = 0
    for index, token in enumerate(tokens):
        found = text.find(token.text, at) if token.text else at
        if found < 0 or text[at:found].strip():  # only spaces may go unclaimed between tokens
            return None
        end = found + len(token.text)
        out.append(replace(token, index=index, text=text[at:end]))
        at = end
    if not out:
        return None
    if at < len(text):
        out[-1] = replace(out[-1], text=out[-1].text + text[at:])
    return tuple(out)
