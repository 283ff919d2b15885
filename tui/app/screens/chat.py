"""The main screen: routes user intent to the controller and engine news to the widgets.

It is the only place that knows both the controller and the widgets; widgets stay dumb
(attributes down, messages up) and the controller never touches a widget. The rest is done by
helpers it owns, each typed by a Protocol of what it needs of the screen: `conversation_actions`,
`param_actions`, `preview_actions`, `stage_actions`, `chat_search`, `focus_rules`, `scope`,
`second`, `model_news` (the `chat_*` modules).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from textual import events, on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen

from engine.core.settings import Config
from tui.app import messages as msg
from engine.core.chat.draft import load_draft
from tui.app.bindings import bindings_for
from tui.app.library_sync import LibrarySync
from tui.app.safe_text import pasted
from tui.app.controller import ChatController, Post
from engine.core.chat.conversation import Node
from tui.app.previews import Previews, PreviewsChanged
from tui.app.screens.chat_actions import ConversationActions
from tui.app.screens.chat_focus import FocusFollowsIntent
from tui.app.screens.chat_model import ModelNews
from tui.app.screens.chat_params import ParamActions
from tui.app.screens.chat_previews import PreviewActions
from tui.app.scores import ScoresChanged
from tui.app.screens.chat_second import SecondModelActions, second_engine_factory
from tui.app.widgets.second_line import SecondLine
from tui.app.screens.chat_scope import ScopeActions
from tui.app.screens.chat_search import SearchActions
from tui.app.screens.chat_stages import StageActions
from tui.app.screens.layout import LAYOUT_CSS, fit, toggle
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.heat_legend import HeatLegend
from tui.app.widgets.key_bar import KeyBar
from tui.app.widgets.params_panel import ParamsPanel
from tui.app.widgets.previews import PreviewsPanel
from tui.app.widgets.render import HeatMode, HeatPalette
from tui.app.widgets.status_bar import StatusBar
from tui.app.widgets.transcript import Transcript


PANEL_HZ = 8.0  # redraws a second of the candidates panel while it follows a streaming reply
HEAT_CYCLE: tuple[HeatMode | None, ...] = (None, "p", "entropy")  # what F3 steps through


class ChatScreen(Screen[None]):
    """Transcript and input on the left, candidates and parameters on the right."""

    DEFAULT_CSS = LAYOUT_CSS
    BINDINGS = bindings_for("screen")

    def __init__(self, make_controller: Callable[[Post], ChatController], config: Config,
                 library: LibrarySync, draft_file: Path | None = None) -> None:
        """`library`: where every chat is kept (and "resume" finds the last one);
        `draft_file`: the message left unsent at the last quit, put back into the input."""
        super().__init__()
        self.draft_file = draft_file
        self.controller = make_controller(self.post_message)
        self.config = config
        self.heat_mode: HeatMode | None = "p" if config.ui.heatmap else None
        self._panel_due = 0.0  # monotonic time from which the streaming candidates panel may redraw
        self._dropped = 0  # oldest messages the last turn left out to fit the context
        self._prompt_tokens: int | None = None  # the streaming reply's prompt length, where counted
        self.previews = Previews(self.controller.engine, self.post_message, config.preview)
        self.focus_rules = FocusFollowsIntent(self)
        self.chat_search = SearchActions(self)
        self.preview_actions = PreviewActions(self, self.previews)
        self.param_actions = ParamActions(self)
        self.stage_actions = StageActions(self)
        self.conversation_actions = ConversationActions(self, library)
        self.scope = ScopeActions(self, config.ui.forks)  # scores, probes, forks (#33)
        self.second_engine_factory = second_engine_factory(self.controller.engine, config)
        self.second = SecondModelActions(self)  # a second model reading the chat (#33.5)
        self.model_news = ModelNews(self)  # loads and losses, on the status bar and in toasts

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            with Vertical(id="chat"):
                yield Transcript()
                yield HeatLegend()
                yield ChatInput(id="input")
            with Vertical(id="side"):
                yield CandidatesPanel(classes="" if self.config.ui.show_candidates else "-hidden")
                yield SecondLine()
                yield PreviewsPanel()
                yield ParamsPanel(classes="" if self.config.ui.show_params else "-hidden")
        yield StatusBar()
        yield KeyBar()

    def on_mount(self) -> None:
        transcript = self.query_one(Transcript)
        transcript.low_threshold = self.config.ui.low_prob_threshold
        self.scope.mounted()
        self.query_one(ParamsPanel).params = self.controller.params
        self.watch(self.query_one(ParamsPanel), "params", self.preview_actions.params_changed, init=False)
        self._apply_heat()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._apply_heat())
        self._update_side()
        chat_input = self.query_one(ChatInput)
        draft = load_draft(self.draft_file) if self.draft_file is not None else ""
        if draft.strip():  # the message left unsent at the last quit (#30.6), as data
            chat_input.load_text(pasted(draft))
            chat_input.move_cursor(chat_input.document.end)
        chat_input.focus()

    def on_unmount(self) -> None:
        """No preview task and no score outlive the screen (the engine is closed after it)."""
        self.previews.stop()
        self.scope.scores.stop()

    def on_screen_resume(self) -> None:
        self.focus_rules.screen_resumed()

    # --- engine news

    @on(msg.ModelLoadStarted)
    def _load_started(self, event: msg.ModelLoadStarted) -> None:
        self.model_news.started(event.spec)

    @on(msg.ModelLoading)
    def _loading(self, event: msg.ModelLoading) -> None:
        self.model_news.progress(event.progress)

    @on(msg.ContextMeasured)
    def _measured(self, event: msg.ContextMeasured) -> None:
        self.query_one(StatusBar).context_used = event.tokens

    @on(msg.ModelLoaded)
    def _loaded(self, event: msg.ModelLoaded) -> None:
        self.model_news.loaded(event.info)

    @on(msg.ModelLoadFailed)
    def _load_failed(self, event: msg.ModelLoadFailed) -> None:
        self.model_news.failed(event.error)

    @on(msg.ModelLost)
    def _lost(self, event: msg.ModelLost) -> None:
        self.model_news.lost(event.why)

    @on(msg.SendRefused)
    def _refused(self, event: msg.SendRefused) -> None:
        """Nothing was added: the text goes back into the input (unless the user typed anew)."""
        self._give_back(event.text)
        self.query_one(StatusBar).state = "not sent"
        self.notify(event.reason, title="Not sent", severity="warning", timeout=15)
        self.refresh_bindings()

    @on(msg.GenerationStarted)
    def _started(self, event: msg.GenerationStarted) -> None:
        transcript = self.query_one(Transcript)
        transcript.show(self.controller.conversation)
        view = transcript.view_of(event.node)
        if view is not None:
            view.streaming = True
            view.rebuild()
        if transcript.cursor is None:
            transcript.anchor()
        self._dropped = event.dropped
        self._prompt_tokens = event.prompt_tokens
        self.chat_search.end_search()  # the chat changes: the matches would be stale
        if event.prompt_tokens is not None:  # "ctx 0/512" said nothing while the first reply streamed
            self.query_one(StatusBar).context_used = event.prompt_tokens
        self.preview_actions.drop()
        self.query_one(StatusBar).state = "generating…" + self._dropped_note()
        self.refresh_bindings()

    def _dropped_note(self) -> str:
        """What the status bar adds while the oldest messages are left out ([chat] context_strategy)."""
        n = self._dropped
        return f" · context full: the oldest {n} message{'s' if n != 1 else ''} left out" if n else ""

    @on(msg.ReplyGrew)
    def _grew(self, event: msg.ReplyGrew) -> None:
        transcript = self.query_one(Transcript)
        transcript.stream_grew(event.node, follow=False)
        if self._prompt_tokens is not None:
            self.query_one(StatusBar).context_used = self._prompt_tokens + len(event.node.version.tokens or ())
        now = time.monotonic()
        if transcript.cursor is None and event.node.version.tokens and now >= self._panel_due:
            # The newest token's table, a few times a second: at tens of tokens a second no one
            # reads each one, and each redraw takes CPU the engine needs (the reply's end shows
            # the last token anyway).
            self._panel_due = now + 1.0 / PANEL_HZ
            panel = self.query_one(CandidatesPanel)
            panel.streaming, panel.token = True, event.node.version.tokens[-1]
            self.stage_actions.cursor()

    @on(msg.GenerationFinished)
    def _finished(self, event: msg.GenerationFinished) -> None:
        self._end_stream(event.node)
        bar = self.query_one(StatusBar)
        bar.stats = event.stats
        if event.compute:  # e.g. llama.cpp's thread count, chosen on the user's replies
            bar.show_compute(event.compute)
        bar.past_thinking = self.controller.past_thinking_label()
        bar.state = ("stopped" if event.reason == "cancelled" else "ready") + self._dropped_note()
        self.scope.rescore()

    @on(msg.GenerationFailed)
    def _failed(self, event: msg.GenerationFailed) -> None:
        if event.node is not None:
            self._end_stream(event.node)
        bar = self.query_one(StatusBar)
        bar.state = "error"
        if self.controller.engine.model is None:  # the engine lost its model (its process ended)
            bar.show_no_model()
        self.notify(event.error, title="Generation failed", severity="error", timeout=15)

    def _end_stream(self, node: Node) -> None:
        transcript = self.query_one(Transcript)
        view = transcript.view_of(node)
        if view is not None:
            view.streaming = False
            view.sync()
        panel = self.query_one(CandidatesPanel)
        panel.streaming = False
        if transcript.cursor is None and node.version.tokens:
            panel.token = node.version.tokens[-1]
        self.stage_actions.cursor()
        self.refresh_bindings()

    # --- user intent from widgets

    @on(msg.Submitted)
    def _submitted(self, event: msg.Submitted) -> None:
        """Send, or say why not and give the text back to the input (it was cleared on Enter)."""
        if self.controller.busy:
            why = "A reply is still streaming: Esc stops it."
        elif self.controller.loading:
            why = "A model is loading: send when it is ready."
        elif self.controller.engine.model is None:
            why = self.controller.lost or "No model is loaded: 'Switch model…' in the command palette picks one."
            self.query_one(StatusBar).show_no_model()  # it may have been lost since (the engine process ended)
        else:
            self.query_one(Transcript).clear()
            self.controller.send(event.text)
            return
        self._give_back(event.text)
        self.notify(why, severity="warning")

    def _give_back(self, text: str) -> None:
        """Put an unsent message back into the input, unless the user has typed anew."""
        chat_input = self.query_one(ChatInput)
        if text and not chat_input.text.strip():
            chat_input.load_text(text)
            chat_input.move_cursor(chat_input.document.end)

    @on(msg.TokenSelected)
    def _token_selected(self, event: msg.TokenSelected) -> None:
        panel = self.query_one(CandidatesPanel)
        panel.streaming = False
        panel.token = event.token
        self.preview_actions.cursor(event.node, event.index)
        self.second.token_selected(event.node, event.index)
        self.stage_actions.cursor()

    @on(Transcript.Shown)
    def _shown(self) -> None:
        self.scope.rescore()
        self.second.chat_rested()

    @on(ScoresChanged)
    def _scores_changed(self, event: ScoresChanged) -> None:
        self.scope.scores_changed(event)
        self.second.chat_rested()  # the transcript shows the scored tokens now: map them

    def second_changed(self) -> None:
        """The second model opened, closed or read the chat anew: the heatmap by disagreement
        takes the new ratios (or, closed, steps back to off)."""
        if self.heat_mode == "disagreement" and not self.second.open:
            self.heat_mode = None
        self._apply_heat()

    def action_probe_phrase(self) -> None:
        self.scope.probe()

    @on(msg.CandidateChosen)
    def _candidate_chosen(self, event: msg.CandidateChosen) -> None:
        self.preview_actions.branch(event.position)

    @on(msg.CandidateBias)
    def _candidate_bias(self, event: msg.CandidateBias) -> None:
        self.param_actions.bias(event.position, event.step)

    @on(msg.DraftPaused)
    def _draft_paused(self, event: msg.DraftPaused) -> None:
        self.controller.prepare(draft=event.text, measure=False)  # read a long message ahead while it is written

    @on(Transcript.FlipRequested)
    def _flip(self, event: Transcript.FlipRequested) -> None:
        self.conversation_actions.flip(event.node, event.step)

    @on(msg.ParamStep)
    def _param_step(self, event: msg.ParamStep) -> None:
        self.param_actions.step(event.name, event.direction)

    @on(msg.ParamEdit)
    def _param_edit(self, event: msg.ParamEdit) -> None:
        self.param_actions.edit(event.name)

    @on(PreviewsChanged)
    def _previews_changed(self, event: PreviewsChanged) -> None:
        self.preview_actions.changed(event)

    @on(msg.SearchStep)
    def _search_step(self, event: msg.SearchStep) -> None:
        self.chat_search.step(event.step)

    # --- parameters (`param_actions`)

    def action_step_param(self, name: str, direction: int) -> None:
        self.param_actions.step(name, direction)

    def action_apply_recommended(self) -> None:
        self.param_actions.apply_recommended()

    def action_next_preset(self) -> None:
        self.param_actions.next_preset()

    # --- chat actions

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Escape stops only while streaming; otherwise it falls through (leave the input)."""
        if action == "stop":
            return self.controller.busy
        if action == "probe_phrase":
            return self.scope.can_probe()  # hidden where the engine cannot (said once at load)
        return True

    def action_stop(self) -> None:
        self.controller.stop()

    def action_regenerate(self) -> None:
        self.conversation_actions.regenerate()

    def action_edit_last(self) -> None:
        self.conversation_actions.edit_last()

    def action_edit_message(self) -> None:
        self.conversation_actions.edit_message()

    def action_delete_message(self) -> None:
        self.conversation_actions.delete_message()

    def action_new_chat(self) -> None:
        self.conversation_actions.new_chat()

    def action_resume_last(self) -> None:
        self.conversation_actions.resume_last()

    def action_system_prompt(self) -> None:
        self.conversation_actions.system_prompt()

    def action_search(self) -> None:
        self.chat_search.search()

    def action_toggle_previews(self) -> None:
        self.preview_actions.toggle()

    def action_toggle_stages(self) -> None:
        self.stage_actions.toggle()

    def action_toggle_thinking(self) -> None:
        """Each reply keeps the switch it was written under; this sets the next ones'."""
        self.notify(self.controller.toggle_thinking())
        self.query_one(StatusBar).thinking = self.controller.thinking

    def action_toggle_past_thinking(self) -> None:
        """Earlier replies' thinking: exact cache, or as the template renders it (the palette)."""
        self.notify(self.controller.toggle_past_thinking())
        self.query_one(StatusBar).past_thinking = self.controller.past_thinking_label()

    # --- view

    @property
    def heatmap(self) -> bool:
        """Whether the heatmap is on (by either measure): what "save settings" keeps."""
        return self.heat_mode is not None

    def action_toggle_heatmap(self) -> None:
        """Off, then by probability, then by entropy, then off again."""
        cycle = HEAT_CYCLE + (("disagreement",) if self.second.open else ())
        self.heat_mode = cycle[(cycle.index(self.heat_mode) + 1) % len(cycle)] if self.heat_mode in cycle else None
        self._apply_heat()

    def _apply_heat(self) -> None:
        mode = self.heat_mode
        heat = HeatPalette.from_variables(self.app.theme_variables, mode) if mode is not None else None
        heat = heat.switched(heat.by, self.second.ratios) if heat is not None else None
        self.query_one(Transcript).set_heat(heat)
        self.query_one(HeatLegend).palette = heat

    def action_toggle_units(self) -> None:
        """The candidates panel in percent or in natural-log probabilities."""
        panel = self.query_one(CandidatesPanel)
        panel.logprobs = not panel.logprobs

    def on_resize(self, event: events.Resize) -> None:
        fit(self, event.size)

    def action_toggle_candidates(self) -> None:
        toggle(self, self.query_one(CandidatesPanel), self.query_one(ParamsPanel), params=False)

    def action_toggle_params(self) -> None:
        toggle(self, self.query_one(ParamsPanel), self.query_one(CandidatesPanel), params=True)

    def clear_panels(self) -> None:
        """No old token's numbers, no old turn's stats or 'stopped'/'error' for a chat that is new
        (or resumed, or cut back): the panels describe the conversation on screen."""
        panel = self.query_one(CandidatesPanel)
        panel.streaming, panel.token = False, None
        bar = self.query_one(StatusBar)
        self._dropped = 0
        bar.stats = None
        if not self.controller.loading:
            bar.state = "ready" if self.controller.engine.model is not None else ""

    def _update_side(self) -> None:
        hidden = all(w.has_class("-hidden") for w in (self.query_one(CandidatesPanel), self.query_one(ParamsPanel)))
        self.query_one("#side").set_class(hidden, "-hidden")
