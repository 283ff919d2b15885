"""The chat screen's scope actions (#33): the text the model reads scored (its tokens, the
perplexities), probes at the cursor, and the fork thresholds (what f / F stop at and the
replies' headers count), set from the palette and kept by "Save settings".

A helper object the screen owns (`ChatScreen.scope`), not a mixin: it reaches the widgets only
through the screen's public `query_one`, `notify`, `app` and `controller`, so the screen stays a
router (its handlers for `ScoresChanged` and `Transcript.Shown` are one line each, here).
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from engine.core.api import MAX_SCORE_CANDIDATES, EngineError, ProbeResult
from engine.core.forks import ENTROPY_LIMIT, ForkRule
from engine.core.settings import printable
from tui.app.scores import ChatScores, ScoresChanged
from tui.app.screens.dialogs import ValueDialog
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.status_bar import StatusBar
from tui.app.widgets.transcript import Transcript
from tui.app.widgets.render import percent

if TYPE_CHECKING:
    from engine.core.settings import Config
    from tui.app.controller import ChatController
    from tui.app.screens.chat_focus import FocusFollowsIntent


class ScopeHost(Protocol):
    """What the helper needs of the chat screen (a Protocol: the two modules do not import each
    other)."""

    controller: "ChatController"
    config: "Config"
    app: Any
    focus_rules: "FocusFollowsIntent"  # a dialog that places the focus itself says so there

    def query_one(self, selector: Any) -> Any: ...
    def post_message(self, message: Any) -> bool: ...
    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...

ForkSetting = Literal["entropy", "margin"]

_FORK_DIALOG: dict[ForkSetting, tuple[str, float, str]] = {
    # the hints fit the dialog at 80 columns (a longer one is cut)
    "entropy": ("Fork: entropy above (nats)", ENTROPY_LIMIT, "a token above this is a fork; 0: not by entropy"),
    "margin": ("Fork: top two closer than (probability)", 1.0,
               "0.05: top two within 5 points is a fork; 0: off"),
}


def parse_fork_value(setting: ForkSetting, text: str) -> float | str:
    """The typed threshold, or one line saying why it is not one."""
    _title, high, _hint = _FORK_DIALOG[setting]
    try:
        value = float(text.strip())
    except ValueError:
        return f"a number from 0 to {high:g}, got {text.strip()[:20]!r}"
    if not 0.0 <= value <= high:  # also NaN
        return f"a number from 0 to {high:g}, got {value:g}"
    return value


def probe_text(result: ProbeResult, short: bool = False) -> str:
    """One line: the phrase, its probability there, its first token's rank (and its tokens);
    `short`: as the candidates panel's one row says it."""
    p = math.exp(result.logprob)
    shown = percent(p, precise=True) if p >= 1e-4 else f"{p:.1e}"
    if short:
        return f"{printable(result.phrase)!r} {shown} · rank {result.first_rank}"
    tokens = f" ({len(result.ids)} tokens)" if len(result.ids) > 1 else ""
    return f"{printable(result.phrase)!r}: p {shown}{tokens}, first token rank {result.first_rank}"


class ScopeActions:
    """What the screen delegates about inspecting text beyond a reply's candidates."""

    def __init__(self, screen: ScopeHost, forks: ForkRule) -> None:
        self.screen = screen
        self.forks = forks
        controller = screen.controller
        self.scores = ChatScores(controller.engine, screen.post_message, screen.config.ui.score_chat,
                                 candidates=max(1, min(controller.params.candidates, MAX_SCORE_CANDIDATES)))
        controller.before_turn.append(self.scores.stop)  # a score in flight gives way to a turn at once
        self._told: set[str] = set()  # reasons already said (once each)
        self._probe: asyncio.Task[None] | None = None

    def mounted(self) -> None:
        """The transcript takes the configured rule and reads the scores from here."""
        transcript = self.screen.query_one(Transcript)
        transcript.scores = self.scores
        transcript.set_forks(self.forks)
        self.screen.query_one(CandidatesPanel).forks = self.forks

    # --- scoring

    def rescore(self) -> None:
        """Score what the model reads of the chat shown, once it rests (never while a reply
        streams: the engine is the reply's); an engine that cannot says why, once."""
        controller = self.screen.controller
        if controller.busy or controller.loading or controller.engine.model is None:
            self.scores.stop()
            return
        why = self.scores.why_not()
        controller.score_candidates = self.scores.candidates if self.scores.enabled and not why else None
        if why:
            self._tell(f"{why} Your messages stay plain text: no probes, no perplexity.")
            if self.scores.request is not None:  # another model's scores: not this one's
                self.scores.forget()
                self._show_scores()
            return
        messages = controller.history()
        nodes = self.screen.query_one(Transcript).path_nodes()
        if len(messages) != len(nodes):
            return  # the transcript has not caught up with the chat yet; its `Shown` asks again
        context = (controller.model_folder, controller.conversation.system_prompt, controller.drops_past_thinking)
        self.scores.ask(messages, nodes, context)

    def toggle_scoring(self) -> None:
        """The palette's switch: off forgets every score (the messages are plain text again)."""
        scores = self.scores
        scores.enabled = not scores.enabled
        self.screen.controller.score_candidates = None  # `rescore` sets it again when on
        if scores.enabled:
            self.rescore()
        else:
            scores.forget()
            self._show_scores()
        self.screen.notify("Scoring the chat on." if scores.enabled else "Scoring the chat off.", timeout=3)

    def scores_changed(self, event: ScoresChanged) -> None:
        if event.problem:
            self._tell(f"Not scored: {event.problem}")
            return
        self._show_scores()

    def _show_scores(self) -> None:
        self.screen.query_one(Transcript).scores_changed()
        self.screen.query_one(StatusBar).perplexity = self.scores.perplexity

    def _tell(self, line: str) -> None:
        """Say `line` once: again only for another reason (its numbers aside: a chat too long for
        the context is said once, not at each turn as it grows)."""
        reason = re.sub(r"\d+", "#", line)
        if reason not in self._told:
            self._told.add(reason)
            self.screen.notify(line, severity="warning", timeout=8, markup=False)

    # --- probes

    def can_probe(self) -> bool:
        model = self.screen.controller.engine.model
        return model is None or model.abilities.probes

    def probe(self) -> None:
        """Ask for a word or phrase, then show its probability in place of the selected token."""
        model = self.screen.controller.engine.model
        if model is not None and not model.abilities.probes:
            self.screen.notify(model.abilities.reason("probes") or "This engine cannot probe.", severity="warning")
            return
        cursor = self.screen.query_one(Transcript).cursor
        if cursor is None:
            self.screen.notify("Select a token first (Esc, then ←/→): a probe asks in its place.", severity="warning")
            return
        node, index = cursor

        def validate(text: str) -> str | None:
            return None if text else "type a word or phrase (a leading space is part of it)"

        def done(text: str | None) -> None:
            if text:
                self._probe = asyncio.create_task(self._run_probe(node, index, text))

        self.screen.focus_rules.keep_focus = True  # back on the transcript, as after a search: inspecting goes on
        self.screen.app.push_screen(ValueDialog(
            f"Probe in place of token #{index}", "", validate,
            "its probability in this place, and its first token's rank"), done)

    async def _run_probe(self, node: object, index: int, phrase: str) -> None:
        from engine.core.chat.conversation import Node

        assert isinstance(node, Node)
        try:
            result = await self.scores.probe(node, index, phrase)
        except EngineError as exc:
            self.screen.notify(str(exc), title="No probe", severity="warning", markup=False)
            return
        panel = self.screen.query_one(CandidatesPanel)
        if self.screen.query_one(Transcript).cursor == (node, index):
            panel.probe = probe_text(result, short=True)
        self.screen.notify(probe_text(result), title="Probe", timeout=10, markup=False)

    # --- forks

    def edit_fork(self, setting: ForkSetting) -> None:
        """Ask for one fork threshold (the palette's "Set fork …"); applied at once."""
        title, _high, hint = _FORK_DIALOG[setting]

        def validate(text: str) -> str | None:
            value = parse_fork_value(setting, text)
            return value if isinstance(value, str) else None

        def done(text: str | None) -> None:
            value = parse_fork_value(setting, text) if text is not None else None
            if isinstance(value, float):
                self.set_forks(replace(self.forks, **{setting: value}))

        self.screen.app.push_screen(ValueDialog(title, f"{getattr(self.forks, setting):g}", validate, hint), done)

    def set_forks(self, rule: ForkRule) -> None:
        self.forks = rule
        self.screen.query_one(Transcript).set_forks(rule)
        self.screen.query_one(CandidatesPanel).forks = rule
        self.screen.notify(f"Forks: {rule.describe()}", timeout=3)

    def ui_settings(self) -> dict[str, float]:
        """What "Save settings" writes to [ui] for this helper."""
        return {"fork_entropy": self.forks.entropy, "fork_margin": self.forks.margin, "score_chat": self.scores.enabled}
