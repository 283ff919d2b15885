"""The conversation as plain data: a tree of messages, each with alternative versions.

Textual-free on purpose, so saving, loading and testing need no UI. The shape is a tree because
every way of "trying again" keeps what it replaces:

- regenerate adds a new version to the last assistant message,
- edit-and-resend adds a new version to the last user message,
- choosing another candidate for token *i* adds a version that shares the first *i* tokens.

Each `Version` owns the message that follows it (`child`), so flipping to an older branch brings
back the whole conversation that continued from it. The visible conversation is the path that
follows every message's active version (`Conversation.path`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

from engine.core.api import Message, Role, SamplingParams, TokenEvent, TurnFinished
from engine.core.thinking import holds_thinking


@dataclass(frozen=True)
class TurnStats:
    """What the status bar shows about a finished turn (the slim part of `TurnFinished`)."""

    prompt_tokens: int
    reused_tokens: int
    prefilled_tokens: int
    generated_tokens: int
    ttft_s: float
    prefill_tps: float
    decode_tps: float
    context_used: int
    context_limit: int

    @classmethod
    def from_finished(cls, done: TurnFinished) -> "TurnStats":
        return cls(**{name: getattr(done, name) for name in cls.__dataclass_fields__})


@dataclass
class Version:
    """One version of a message. Assistant versions carry their tokens (with candidates)."""

    text: str = ""
    tokens: list[TokenEvent] | None = None  # assistant only
    params: SamplingParams | None = None  # the params the reply started with
    finish_reason: str | None = None  # None while streaming (assistant only)
    branched_at: int | None = None  # token index where this branch left its sibling
    stats: TurnStats | None = None
    child: "Node | None" = None  # the message that follows this version
    # The folder of the model whose token ids `tokens` holds (assistant only). None: made in this
    # session for the model loaded now; "" (a file without it): unknown, so never spliced by id.
    model: str | None = None
    # The thinking switch the reply was written under (assistant only; None: the template's
    # default): its generation prompt is rendered so again, keeping the history token-exact.
    thinking: bool | None = None
    # Not saved: the prompt this reply answers ended inside a <think> block (ModelInfo.opens_thinking),
    # so it thinks from its first token. Only a streaming reply needs it: a finished one shows its </think>.
    thinking_opened: bool = False
    # Not saved: the first token this version's own turn drew. A branch begins with tokens it did
    # not draw (copied, the one chosen by hand, those of the preview it started from); None: right
    # after `branched_at` (the whole reply when it is no branch). The stage view replays from here.
    turn_start: int | None = field(default=None, compare=False)
    # Parameters changed while the reply streamed (#30.6): (the token index they applied from,
    # the parameters from there on), oldest first. The reply's header says what changed where.
    changes: list[tuple[int, SamplingParams]] = field(default_factory=list)

    @property
    def token_ids(self) -> tuple[int, ...]:
        return tuple(t.id for t in self.tokens or ())

    def ids_fit(self, model: str | None) -> bool:
        """Whether this version's token (and candidate) ids belong to the model in folder `model`."""
        return self.model is None or self.model == model

    def settle(self, text: str) -> None:
        """Take the finished reply's whole `text`. What the stream held back to the end (the
        bytes of a character the reply was cut inside, ``\\xe4``) joins the last token's text,
        so the tokens' texts add up to the reply's text: the token view shows all of it. Not when
        no token has text (`texts_unknown`): the reply is then never glued onto its last token."""
        self.text = text
        if not self.tokens or self.texts_unknown:
            return
        shown = "".join(token.text for token in self.tokens)
        if len(text) > len(shown) and text.startswith(shown):
            last = self.tokens[-1]
            self.tokens[-1] = replace(last, text=last.text + text[len(shown):])

    @property
    def texts_unknown(self) -> bool:
        """A reply with text whose tokens carry none: a server that sent bare ids, with no
        tokenizer here to spell them (engine.remote). Its text is shown whole, beside the tokens."""
        return bool(self.tokens) and bool(self.text) and not any(t.text for t in self.tokens or ())

    def reply_text(self) -> str:
        """The text so far: the joined tokens while streaming, the engine's text once finished."""
        if self.tokens is None or (self.finish_reason is not None and self.text):
            return self.text
        return "".join(t.text for t in self.tokens)


@dataclass
class Node:
    """One message of the conversation, with its versions and which one is shown."""

    role: Role
    versions: list[Version] = field(default_factory=list)
    active: int = 0

    @property
    def version(self) -> Version:
        return self.versions[self.active]

    def add_version(self, version: Version) -> Version:
        """Append a version and make it the shown one."""
        self.versions.append(version)
        self.active = len(self.versions) - 1
        return version

    def flip(self, step: int) -> bool:
        """Show the previous/next version; False when there is none that way."""
        target = self.active + step
        if not 0 <= target < len(self.versions):
            return False
        self.active = target
        return True


ChangeListener = Callable[["Conversation"], None]


@dataclass
class Conversation:
    """A system prompt and the root of the message tree.

    `revision` counts the changes its owner (a front end's controller) made: whoever keeps a copy
    elsewhere (the library) compares revisions instead of walking the tree, and learns of each
    change from `watch` instead of looking every so often. Whoever changes the tree calls
    `changed` once the change is whole (`append` does it itself)."""

    system_prompt: str = ""
    root: Node | None = None
    revision: int = field(default=0, compare=False)
    _listeners: list[ChangeListener] = field(default_factory=list, repr=False, compare=False)

    def changed(self) -> None:
        """Count a change and tell every listener (on the thread that made the change)."""
        self.revision += 1
        for listener in tuple(self._listeners):
            listener(self)

    def watch(self, listener: ChangeListener) -> None:
        """Call `listener(conversation)` after every change from now on."""
        self._listeners.append(listener)

    def unwatch(self, listener: ChangeListener) -> None:
        """Stop telling `listener` (no error when it was not watching)."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    def path(self) -> list[Node]:
        """The visible messages: follow each message's active version to its child."""
        nodes: list[Node] = []
        node = self.root
        while node is not None:
            nodes.append(node)
            node = node.version.child
        return nodes

    def append(self, node: Node) -> Node:
        """Add a message at the end of the visible path."""
        path = self.path()
        if path:
            path[-1].version.child = node
        else:
            self.root = node
        self.changed()
        return node

    def parent_of(self, node: Node) -> Node | None:
        """The message before `node` on the visible path (None for the first)."""
        path = self.path()
        index = next(i for i, n in enumerate(path) if n is node)
        return path[index - 1] if index else None

    def messages(self, upto: Node | None = None, model: str | None = None,
                 drop_thinking: bool = False) -> tuple[Message, ...]:
        """The engine's view of the path, up to but excluding `upto`, for the model in folder `model`.

        A reply enters as its exact token ids only when they are that model's (`ids_fit`);
        otherwise as text, which the engine tokenizes: another model's ids would mean other words.
        `drop_thinking`: a reply holding a thinking block enters as text, so the engine renders
        it as the template does (which may drop the thinking: Qwen3's does, as its model card
        asks) instead of as the exact ids in the cache (reused, thinking kept).
        """
        out = [Message("system", self.system_prompt)] if self.system_prompt else []
        for node in self.path():
            if node is upto:
                break
            version = node.version
            ids = version.token_ids if version.tokens is not None and version.ids_fit(model) else None
            if drop_thinking and node.role == "assistant" and holds_thinking(version.reply_text()):
                ids = None
            out.append(Message(node.role, version.reply_text(), ids, version.thinking))
        return tuple(out)

    def iter_nodes(self) -> Iterator[Node]:
        """Every node of the tree, all branches included (depth first)."""
        stack = [self.root] if self.root else []
        while stack:
            node = stack.pop()
            yield node
            stack.extend(v.child for v in reversed(node.versions) if v.child is not None)

    def unfit_token(self, model: str | None, vocab_size: int) -> str | None:
        """One line naming the first id (a token or a candidate) of `model`'s replies outside
        ``0..vocab_size-1``, else None.

        Why: a file is checked whole against the model it will run on before it replaces the live
        chat; such an id (a damaged or hostile file) would be refused by the engine at the next
        turn, after the chat had already been thrown away. Other models' replies continue as text,
        so their ids are never sent and not checked.
        """
        for number, node in enumerate(self.iter_nodes(), 1):
            for version in node.versions:
                if version.tokens is None or not version.ids_fit(model):
                    continue
                for token in version.tokens:
                    for token_id in (token.id, *(c.id for c in token.candidates)):
                        if not 0 <= token_id < vocab_size:
                            return (f"message {number} ({node.role}) holds token id {token_id}, "
                                    f"not in 0..{vocab_size - 1} for this model")
        return None
