"""The messages that flow up: from the controller (engine news) and from widgets (user intent).

Work flows as an explicit chain, so tests can watch it with ``run_test(message_hook=...)``:
``GenerationStarted -> ReplyGrew* -> GenerationFinished | GenerationFailed``.
"""

from __future__ import annotations

from textual.message import Message

from engine.core.api import LoadProgress, ModelInfo
from engine.core.chat.conversation import Node, TurnStats


class ContextMeasured(Message):
    """The conversation as it now stands (resumed, another branch shown) takes `tokens` of the
    model's context: the engine said so once it had them cached."""

    def __init__(self, tokens: int) -> None:
        super().__init__()
        self.tokens = tokens


class ModelLoadStarted(Message):
    """A load of `spec` began; whatever was loaded before is gone."""

    def __init__(self, spec: str) -> None:
        super().__init__()
        self.spec = spec


class ModelLoading(Message):
    """Loading news (`fraction` None = unknown)."""

    def __init__(self, progress: LoadProgress) -> None:
        super().__init__()
        self.progress = progress


class ModelLoaded(Message):
    def __init__(self, info: ModelInfo) -> None:
        super().__init__()
        self.info = info


class ModelLoadFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class GenerationStarted(Message):
    """A reply (new, regenerated or branched) begins in `node`; `dropped`: how many of the oldest
    messages were left out of the request to fit the context ([chat] context_strategy)."""

    def __init__(self, node: Node, dropped: int = 0, prompt_tokens: int | None = None) -> None:
        """`prompt_tokens`: the prompt's length where it was counted (the context it takes)."""
        super().__init__()
        self.node = node
        self.dropped = dropped
        self.prompt_tokens = prompt_tokens


class SendRefused(Message):
    """A turn did not start and nothing entered the conversation: `reason` is one line for the
    user; `text` is the message that was not sent (back into the input), "" for a regenerate."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__()
        self.text = text
        self.reason = reason


class ReplyGrew(Message):
    """New tokens were added to `node`'s active version (coalesced: tens per second at most)."""

    def __init__(self, node: Node) -> None:
        super().__init__()
        self.node = node


class GenerationFinished(Message):
    def __init__(self, node: Node, stats: TurnStats, reason: str) -> None:
        super().__init__()
        self.node = node
        self.stats = stats
        self.reason = reason


class GenerationFailed(Message):
    def __init__(self, node: Node | None, error: str) -> None:
        super().__init__()
        self.node = node
        self.error = error


class TokenSelected(Message):
    """The token cursor moved (`index` None = no token selected)."""

    def __init__(self, node: Node | None, index: int | None) -> None:
        super().__init__()
        self.node = node
        self.index = index


class CandidateChosen(Message):
    """The user picked candidate number `position` (0-based) of the selected token."""

    def __init__(self, position: int) -> None:
        super().__init__()
        self.position = position


class ParamStep(Message):
    def __init__(self, name: str, direction: int) -> None:
        super().__init__()
        self.name = name
        self.direction = direction


class ParamEdit(Message):
    """Ask for a typed value for `name`."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


class Submitted(Message):
    """The chat input sent `text`."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class DraftPaused(Message):
    """The user stopped typing for a moment with `text` in the chat input (not sent yet)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
