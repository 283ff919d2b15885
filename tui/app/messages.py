"""The messages that flow up: from the controller (engine news) and from widgets (user intent).

Work flows as an explicit chain, so tests can watch it with ``run_test(message_hook=...)``:
``GenerationStarted -> ReplyGrew* -> GenerationFinished | GenerationFailed``.

Each message is a dataclass (Textual calls `__post_init__` for them), compared by identity
(``eq=False``: two equal-looking messages are still two events). Where only the newest of a kind
matters (a reply that grew again, newer load progress, the cursor moved again, a newer draft),
`can_replace` lets Textual drop the older one still waiting in the queue: coalescing without timers.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from engine.core.api import LoadProgress, ModelInfo, TokenEvent
from engine.core.chat.conversation import Node, TurnStats


@dataclass(eq=False)
class ContextMeasured(Message):
    """The conversation as it now stands (resumed, another branch shown) takes `tokens` of the
    model's context: the engine said so once it had them cached."""

    tokens: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ContextMeasured)


@dataclass(eq=False)
class ModelLoadStarted(Message):
    """A load of `spec` began; whatever was loaded before is gone."""

    spec: str


@dataclass(eq=False)
class ModelLoading(Message):
    """Loading news (`progress.fraction` None = unknown)."""

    progress: LoadProgress

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ModelLoading)


@dataclass(eq=False)
class ModelLoaded(Message):
    """The model is in; `info` says what it is and what the engine can do with it."""

    info: ModelInfo


@dataclass(eq=False)
class ModelLoadFailed(Message):
    """The load ended in `error` (one line); the previous model, if any, is still loaded."""

    error: str


@dataclass(eq=False)
class ModelLost(Message):
    """The loaded model is gone between replies (its engine process ended): `why`, one line."""

    why: str


@dataclass(eq=False)
class GenerationStarted(Message):
    """A reply (new, regenerated or branched) begins in `node`; `dropped`: how many of the oldest
    messages were left out of the request to fit the context ([chat] context_strategy)."""

    node: Node
    dropped: int = 0
    prompt_tokens: int | None = None  # the prompt's length where it was counted (the context it takes)


@dataclass(eq=False)
class SendRefused(Message):
    """A turn did not start and nothing entered the conversation: `reason` is one line for the
    user; `text` is the message that was not sent (back into the input), "" for a regenerate."""

    text: str
    reason: str


@dataclass(eq=False)
class ReplyGrew(Message):
    """New tokens were added to `node`'s active version (coalesced: tens per second at most)."""

    node: Node

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ReplyGrew) and message.node is self.node


@dataclass(eq=False)
class GenerationFinished(Message):
    """`node`'s reply ended for `reason` ("stop", "length", "cancelled"), with its statistics."""

    node: Node
    stats: TurnStats
    reason: str
    compute: str = ""  # `TurnFinished.compute`: what computed it, where chosen again since the load


@dataclass(eq=False)
class GenerationFailed(Message):
    """The turn ended in `error` (one line); `node` is the reply it was writing, if any."""

    node: Node | None
    error: str


@dataclass(eq=False)
class TokenSelected(Message):
    """The token cursor moved (`index` None = no token selected); `token`: the token there (a
    reply's, or a read message's scored one)."""

    node: Node | None
    index: int | None
    token: TokenEvent | None = None

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TokenSelected)


@dataclass(eq=False)
class CandidateChosen(Message):
    """The user picked candidate number `position` (0-based) of the selected token."""

    position: int


@dataclass(eq=False)
class CandidateBias(Message):
    """Bias the selected token's candidate number `position`: `step` added to its logit bias,
    or None to ban it (again: unban)."""

    position: int
    step: float | None


@dataclass(eq=False)
class ParamStep(Message):
    """Step parameter `name` one notch up (`direction` 1) or down (-1)."""

    name: str
    direction: int


@dataclass(eq=False)
class ParamEdit(Message):
    """Ask for a typed value for `name`."""

    name: str


@dataclass(eq=False)
class Submitted(Message):
    """The chat input sent `text`."""

    text: str


@dataclass(eq=False)
class DraftPaused(Message):
    """The user stopped typing for a moment with `text` in the chat input (not sent yet)."""

    text: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DraftPaused)


@dataclass(eq=False)
class SearchStep(Message):
    """n / N while a search is on: the next (+1) or previous (-1) match."""

    step: int
