"""The one object that talks to the engine: turns user intent into `GenerateRequest`s and engine
events into conversation data plus coalesced messages.

Generation runs as an asyncio task consuming the engine's async iterator, so the UI never blocks.
Tokens are written into the conversation as they arrive, but `ReplyGrew` is posted at most
`FLUSH_HZ` times a second (`tui.app.coalesce`): a fast stream (hundreds of tokens/s) costs the
screen tens of repaints per second, not one per token.
"""

from __future__ import annotations

import asyncio
import random
from typing import AsyncIterator, Callable, Sequence

from textual.message import Message as TextualMessage

from engine.core.api import (
    EngineAPI,
    EngineError,
    EngineEvent,
    GenerateRequest,
    LoadProgress,
    Message,
    SamplingParams,
    TokenEvent,
    TurnFinished,
)
from tui.app import messages as msg
from engine.core.chat.context import fit_turn, leave_out
from tui.app.coalesce import Coalesced
from tui.app.thinking_switches import ThinkingSwitches
from engine.core.chat.conversation import ChangeListener, Conversation, Node, TurnStats, Version

FLUSH_HZ = 25.0

Post = Callable[[TextualMessage], object]


def draw_seed() -> int:
    """A fresh seed for a turn whose parameters say "random" (short enough to read and retype)."""
    return random.SystemRandom().randrange(2**32)


class ChatController(ThinkingSwitches):
    """Owns the engine and the conversation; posts messages through `post`; holds the thinking
    switches (`tui.app.thinking_switches`)."""

    def __init__(self, engine: EngineAPI, params: SamplingParams, post: Post,
                 context_strategy: str = "drop_oldest", on_change: ChangeListener | None = None) -> None:
        """`context_strategy`: what a turn too long for the context does (`engine.core.chat.context`);
        `on_change` hears every change of whichever conversation the controller holds (the library)."""
        super().__init__()
        self.engine = engine
        self.params = params
        self.context_strategy = context_strategy
        self._on_change = on_change
        self._conversation = Conversation()
        if on_change is not None:
            self._conversation.watch(on_change)
        self._post = post
        self._task: asyncio.Task[None] | None = None
        self._streaming: Node | None = None
        self._closed = False
        self._load_task: asyncio.Task[bool] | None = None
        self._stop_asked = False  # Esc while a turn is still being fitted: it never starts
        self._left_out = 0  # oldest messages the last turn left out to fit the context
        # Called as a turn starts, before the engine is asked anything for it: optional work on
        # the engine (a score of the chat, #33) stops, so it never delays the turn's first token.
        self.before_turn: list[Callable[[], None]] = []
        self._score_candidates: int | None = None  # see `score_candidates`

    @property
    def score_candidates(self) -> int | None:
        """Set while the chat is scored (#33): a turn's prefill keeps every prompt row's statistics
        with this many candidates, so the score after it reads only the reply again."""
        return self._score_candidates

    @score_candidates.setter
    def score_candidates(self, candidates: int | None) -> None:
        """Once set, what is cached is warmed again with the statistics the next turn reads (the
        load's warm-up kept none: the first message after a load reused nothing of it)."""
        changed = candidates != self._score_candidates
        self._score_candidates = candidates
        if changed and candidates is not None:
            self.prepare(measure=False)

    @property
    def conversation(self) -> Conversation:
        """The live chat; the controller is the one that changes it (and says so: `changed`)."""
        return self._conversation

    @conversation.setter
    def conversation(self, conversation: Conversation) -> None:
        """Replace the live chat: `on_change` follows it to the new one."""
        if self._on_change is not None:
            self._conversation.unwatch(self._on_change)
            conversation.watch(self._on_change)
        self._conversation = conversation
        conversation.changed()  # a new live chat is news to whoever keeps it

    @property
    def busy(self) -> bool:
        """True while a reply is streaming (or being fitted into the context, just before)."""
        return self._task is not None and not self._task.done()

    @property
    def loading(self) -> bool:
        """True from the moment a load is asked for until it ends: the one record of a running load."""
        return self._load_task is not None and not self._load_task.done()

    @property
    def lost(self) -> str:
        """Why the model went, when the engine lost it (its process ended); "" otherwise."""
        return str(getattr(self.engine, "lost", "") or "")

    @property
    def can_start(self) -> bool:
        """Whether a new turn may start now (no reply streaming, no model loading, not closed)."""
        return not (self.busy or self.loading or self._closed)

    @property
    def streaming_node(self) -> Node | None:
        return self._streaming if self.busy else None

    # --- model

    def load(self, spec: str, trust_remote_code: bool = False) -> asyncio.Task[bool]:
        """Start loading a model; the task's result says whether it loaded.

        No turn starts while it runs: the engine drops the old model first, and a reply would
        otherwise go to whichever model happens to be there. The task is created here, so
        `loading` is already true when this returns, before the task has run a step: a key
        handled in between is refused too.
        """
        self._load_task = asyncio.create_task(self._load(spec, trust_remote_code))
        return self._load_task

    async def _load(self, spec: str, trust_remote_code: bool) -> bool:
        """Load, posting progress; a failure is a message, never an exception."""
        def progress(progress: LoadProgress) -> None:
            self._post(msg.ModelLoading(progress))
        self._post(msg.ModelLoadStarted(spec))
        watch = getattr(self.engine, "on_lost", None)  # an engine in a process of its own
        if callable(watch):
            watch(lambda why: self._post(msg.ModelLost(why)))
        try:
            info = await self.engine.load(spec, trust_remote_code=trust_remote_code, on_progress=progress)
        except EngineError as exc:
            self._post(msg.ModelLoadFailed(str(exc)))
            return False
        except Exception as exc:  # noqa: BLE001 - an engine's bug fails the load, never the app
            self._post(msg.ModelLoadFailed(f"Could not load {spec}: {type(exc).__name__}: {exc}"))
            return False
        self._post(msg.ModelLoaded(info))
        asyncio.get_running_loop().call_soon(self.prepare)  # once `loading` is over: a kept system prompt
        return True

    # --- parameters

    def set_params(self, params: SamplingParams) -> None:
        """Apply now: a running turn uses them from its next token, and its reply records where
        (`Version.changes`, shown in its header: #30.6); the turn keeps its seed. An engine that
        takes them only from the next reply (`Abilities.live_params`) gets nothing recorded."""
        self.params = params
        node = self._streaming
        version = node.version if node is not None else None
        if (version is not None and version.finish_reason is None and version.params is not None
                and self.live_params):
            params = params.with_changes(seed=version.params.seed)
            version.changes.append((len(version.tokens or ()), params))
        self.engine.set_params(params)

    @property
    def live_params(self) -> bool:
        """Whether a parameter change reaches a running reply (`Abilities.live_params`)."""
        model = self.engine.model
        return model is None or model.abilities.live_params

    def history(self, upto: Node | None = None) -> tuple[Message, ...]:
        """The conversation as the engine gets it (`Conversation.messages`) for the loaded model
        and the past-thinking choice."""
        return self.conversation.messages(upto=upto, model=self.model_folder, drop_thinking=self.drops_past_thinking)

    # --- turns

    def send(self, text: str) -> bool:
        """Append a user message and answer it, once it fits the context (else `SendRefused`,
        and the conversation is as it was)."""
        if not self.can_start:
            return False
        messages = self.history() + (Message("user", text),)

        def commit() -> Node:
            self.conversation.append(Node("user", [Version(text)]))
            return self.conversation.append(Node("assistant"))
        return self._begin(messages, commit, text)

    def regenerate(self) -> bool:
        """A new version of the last assistant reply (the old one stays as a sibling)."""
        path = self.conversation.path()
        if not self.can_start or not path or path[-1].role != "assistant":
            return False
        return self._begin(self.history(upto=path[-1]), lambda: path[-1])

    def edit_last_user(self, text: str) -> bool:
        """A new version of the last user message, answered afresh; the old turn stays a branch."""
        user = self.last_user()
        return user is not None and self.edit_user(user, text)

    def edit_user(self, user: Node, text: str) -> bool:
        """A new version of any user message on the path, answered afresh: what followed the old
        version stays its branch (flip back to it)."""
        if not self.can_start or user.role != "user" or user not in self.conversation.path():
            return False
        messages = self.history(upto=user) + (Message("user", text),)

        def commit() -> Node:
            child = Node("assistant")
            user.add_version(Version(text, child=child))
            self.conversation.changed()
            return child
        return self._begin(messages, commit, text)

    def delete_from(self, node: Node) -> bool:
        """Remove `node` and everything after it on the visible path (not while a turn runs)."""
        path = self.conversation.path()
        if not self.can_start or node not in path:
            return False
        parent = self.conversation.parent_of(node)
        if parent is None:
            self.conversation.root = None
        else:
            parent.version.child = None
        self.conversation.changed()
        self.prepare()
        return True

    def flip(self, node: Node, step: int) -> bool:
        """Show `node`'s previous or next version; False when there is none that way."""
        if not node.flip(step):
            return False
        self.conversation.changed()
        return True

    def set_system_prompt(self, text: str) -> None:
        """The chat's system prompt, from the next turn."""
        self.conversation.system_prompt = text
        self.conversation.changed()

    def last_user(self) -> Node | None:
        return next((n for n in reversed(self.conversation.path()) if n.role == "user"), None)

    def branch(self, node: Node, index: int, position: int, after: Sequence[TokenEvent] = ()) -> str | None:
        """Continue `node`'s reply from candidate `position` of token `index` (a new sibling);
        `after`: the tokens a finished preview showed after that candidate, which it starts with.

        Returns None once the branch streams, else why it cannot start (one line for the user).
        """
        old = node.version
        if self.busy:
            return "Stop the running reply first (Esc)."
        if self.loading:
            return "A model is loading."
        model = self.engine.model
        if model is not None and not model.abilities.branching:  # declared at load: refused before a branch exists
            return model.abilities.reason("branching") or "This engine cannot branch a reply."
        if not old.ids_fit(self.model_folder):  # another model's ids: they would mean other words
            return "This reply came from another model: regenerate it to branch with this one."
        sampled = old.tokens if self.can_start and old.tokens is not None else []
        if not 0 <= index < len(sampled) or not 0 <= position < len(sampled[index].candidates):
            return f"There is no candidate {position + 1} here."
        token = sampled[index]
        cand = token.candidates[position]
        chosen = TokenEvent(index, cand.id, cand.text, cand.text, cand.logprob, cand.sampled_prob,
                            position + 1, token.entropy, token.candidates)
        tokens = [*sampled[:index], chosen, *after]
        params = self._turn_params()
        version = Version(tokens=tokens, params=params, branched_at=index, model=self.model_folder,
                          thinking=old.thinking, thinking_opened=old.thinking_opened,  # the same prompt
                          turn_start=len(tokens))
        node.add_version(version)
        self.conversation.changed()
        prefix = Message("assistant", "".join(t.text for t in tokens), tuple(t.id for t in tokens), old.thinking)
        request = GenerateRequest(self.history(upto=node) + (prefix,),
                                  params, True, score_candidates=self.score_candidates)
        self._start(node, version, request)
        return None

    def _turn_params(self) -> SamplingParams:
        """The parameters a turn starts with: a "random" seed is drawn here, so the reply records
        the seed it was drawn with (its header shows it; the same seed and parameters reproduce it)."""
        if self.params.seed is not None:
            return self.params
        return self.params.with_changes(seed=draw_seed())

    def stop(self) -> None:
        """Stop at once: the engine finishes the turn with reason "cancelled"."""
        if self.busy:
            self._stop_asked = True
            self.engine.cancel()

    def new_chat(self, system_prompt: str | None = None) -> None:
        if not self.busy:
            keep = self.conversation.system_prompt if system_prompt is None else system_prompt
            self.conversation, self._left_out = Conversation(keep), 0
            self.prepare()

    def _begin(self, messages: tuple[Message, ...], commit: Callable[[], Node], text: str = "") -> bool:
        """Start a turn: fit `messages` into the context first, and only then `commit` (add the
        new messages to the conversation; it returns the node the reply goes to) and stream."""
        self._streaming, self._stop_asked = None, False
        for hook in self.before_turn:  # e.g. a score of the chat in flight: the turn goes first
            hook()
        self._task = asyncio.create_task(self._fit_and_answer(messages, commit, text))
        return True

    async def _fit_and_answer(self, messages: tuple[Message, ...], commit: Callable[[], Node], text: str) -> None:
        try:
            fitted = await fit_turn(self.engine, messages, self.context_strategy, self.params.max_tokens,
                                    thinking=self.thinking, dropped_before=self._left_out)
        except EngineError as exc:
            self._post(msg.SendRefused(text, str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - any engine's bug: the message goes back, one line
            self._post(msg.SendRefused(text, f"The engine could not count this message: {type(exc).__name__}: {exc}"))
            return
        if fitted.refusal is not None or self._stop_asked:
            self._post(msg.SendRefused(text, fitted.refusal or "Stopped before the reply began."))
            return
        node = commit()
        params = self._turn_params()
        version = node.add_version(Version(tokens=[], params=params, model=self.model_folder,
                                           thinking=self.thinking, thinking_opened=self._opens_thinking()))
        self.conversation.changed()
        self._streaming, self._left_out = node, fitted.dropped
        request = GenerateRequest(fitted.messages, params, thinking=self.thinking,
                                  score_candidates=self.score_candidates)
        events = self.engine.generate(request)  # asked first: see `_start`
        self._post(msg.GenerationStarted(node, fitted.dropped, fitted.prompt_tokens))
        await self._run(node, version, events)

    @property
    def model_folder(self) -> str | None:
        """The loaded model's folder: what tags the replies (their token ids are this model's)."""
        return self.engine.model.path if self.engine.model is not None else None

    def prepare(self, draft: str = "", measure: bool = True) -> None:
        """Have the engine cache the conversation as it now stands (resumed, another branch shown,
        a new system prompt, a model just loaded), and `draft`, the message being typed, while the
        user types: the next reply then starts from a cached history instead of prefilling all of
        it. Fire and forget: never fails."""
        if not self.can_start or self.engine.model is None:
            return
        messages = leave_out(self.history(), self._left_out)
        if messages and messages[-1].role == "user":  # an unanswered message: its reply comes next
            return
        if messages or draft or self.score_candidates is not None:  # an empty chat: the system prompt
            cached = self.engine.prepare(messages, draft, thinking=self.thinking,  # with statistics
                                         score_candidates=self.score_candidates)  # as the turn will ask
            if measure and messages and not draft and isinstance(cached, asyncio.Future):  # the chat: its ctx
                cached.add_done_callback(self._measured)

    def _measured(self, cached: asyncio.Future[int]) -> None:
        """Pass on how much of the context the conversation takes (0: the engine could not say)."""
        if not cached.cancelled() and cached.exception() is None and cached.result() > 0:
            self._post(msg.ContextMeasured(cached.result()))

    def resume(self, conversation: Conversation) -> str | None:
        """Continue `conversation` (one saved earlier); returns why not (one line), else None.

        Not while a reply runs, and not a conversation holding ids this model does not have: it
        is refused whole, before it replaces the live chat.
        """
        if self.busy:
            return "Busy: Esc stops the reply first."
        info = self.engine.model
        unfit = conversation.unfit_token(self.model_folder, info.vocab_size) if info and info.vocab_size > 0 else None
        if unfit is not None:
            return f"Not opened: {unfit}. The chat you have stays."
        self.conversation, self._left_out = conversation, 0
        self.prepare()  # its history is cached while the user types the next message
        return None

    def _start(self, node: Node, version: Version, request: GenerateRequest) -> bool:
        self._streaming = node
        # The engine is asked first: the screen handles GenerationStarted (mounting the new
        # messages, ~10 ms of the main thread) before this loop runs a new task, and the turn
        # need not wait for that.
        events = self.engine.generate(request)
        self._post(msg.GenerationStarted(node))
        self._task = asyncio.create_task(self._run(node, version, events))
        return True

    async def _run(self, node: Node, version: Version, events: AsyncIterator[EngineEvent]) -> None:
        """Consume one turn; tokens go straight into `version`, the screen hears in batches."""
        assert version.tokens is not None
        grew = Coalesced(lambda: self._post(msg.ReplyGrew(node)), FLUSH_HZ)
        try:
            async for event in events:
                if isinstance(event, TurnFinished):
                    self._finish(node, version, event)
                    return
                version.tokens.append(event)
                self.conversation.changed()
                grew.ask()
            raise EngineError("the engine ended the turn without finishing it")
        except EngineError as exc:
            version.finish_reason = "error"
            self._post(msg.GenerationFailed(node, str(exc)))
        except Exception as exc:  # noqa: BLE001 - an engine's bug ends the turn, never the chat
            version.finish_reason = "error"
            self._post(msg.GenerationFailed(node, f"The engine failed: {type(exc).__name__}: {exc}"))
        finally:
            if version.finish_reason is None:  # cancelled by quitting: saved as what it is
                version.finish_reason = "cancelled"
            self.conversation.changed()
            grew.cancel()

    def _finish(self, node: Node, version: Version, done: TurnFinished) -> None:
        version.settle(done.text)
        if done.params_changes is not None:  # where the engine applied them (ours may be a token early)
            version.changes = list(done.params_changes)
        version.finish_reason = done.finish_reason
        version.stats = TurnStats.from_finished(done)
        self._post(msg.GenerationFinished(node, version.stats, done.finish_reason, done.compute))
        # Once this turn's task is over: the reply's end and the next user header, which every
        # follow-up shares, are read while the user reads the reply (not on the next first token).
        # The turn's own stats say the context used: no second count.
        asyncio.get_running_loop().call_soon(lambda: self.prepare(measure=False))

    async def close(self) -> None:
        """Stop any turn or load and close the engine (its thread stopped and joined). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.busy and self._task is not None:
            self.engine.cancel()
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.loading and self._load_task is not None:  # no task outlives the controller
            self._load_task.cancel()
            await asyncio.gather(self._load_task, return_exceptions=True)
        await self.engine.close()
