"""The main screen: routes user intent to the controller and engine news to the widgets.

It is the only place that knows both the controller and the widgets; widgets stay dumb
(attributes down, messages up) and the controller never touches a widget.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from textual import events, on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical

from engine.core.api import ParamError, SamplingParams
from engine.models import DEMO_SPEC
from engine.core.settings import Config, printable
from tui.app import messages as msg
from engine.core.chat.draft import load_draft
from tui.app.bindings import bindings_for
from tui.app.safe_text import pasted
from tui.app.bias_labels import bias_labels
from tui.app.controller import ChatController, Post
from engine.core.chat.conversation import Node
from engine.core.param_steps import (
    ALL_PARAMS, LABELS, apply_preset, bias_step, format_param, parse_param, step_param, typed_value,
)
from tui.app.previews import Previews
from tui.app.screens.chat_actions import ConversationActions
from tui.app.screens.chat_focus import FocusFollowsIntent
from tui.app.screens.chat_previews import PreviewActions
from tui.app.scores import ScoresChanged
from tui.app.screens.chat_second import SecondModelActions, second_engine_factory
from tui.app.widgets.second_line import SecondLine
from tui.app.screens.chat_scope import ScopeActions
from tui.app.screens.chat_search import SearchActions
from tui.app.screens.chat_biases import BiasActions
from tui.app.screens.chat_stages import StageActions
from tui.app.screens.dialogs import TextDialog, ValueDialog
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


_HINTS = {
    "seed": "empty or 'random' = a fresh seed each turn",
    "dry_sequence_breakers": "comma-separated; \\n = line break, \\, = comma; 'none': no breakers",
    "samplers": "llama.cpp, mlx-lm, logitscope, or stage names joined by ';'",
    "mirostat": "0 = off, 2 = mirostat v2",
}


class ChatScreen(FocusFollowsIntent, ConversationActions, PreviewActions, SearchActions, StageActions,
                 BiasActions):
    """Transcript and input on the left, candidates and parameters on the right."""

    DEFAULT_CSS = LAYOUT_CSS
    BINDINGS = bindings_for("screen")

    def __init__(self, make_controller: Callable[[Post], ChatController], config: Config,
                 saved_conversation: Path | None = None, draft_file: Path | None = None) -> None:
        """`saved_conversation`: the file the app writes on quit, which "resume" reopens;
        `draft_file`: the message left unsent at the last quit, put back into the input."""
        super().__init__()
        self.draft_file = draft_file
        self.controller = make_controller(self.post_message)
        self.config = config
        self.saved_conversation = saved_conversation
        self.heat_mode: HeatMode | None = "p" if config.ui.heatmap else None
        self.preset = ""
        self._bias_names: dict[int, str] = {}  # token id -> its text, for the panel's list of biases
        self._loading_spec = DEMO_SPEC  # the model being loaded: the welcome names it once it is in
        self._panel_due = 0.0  # monotonic time from which the streaming candidates panel may redraw
        self._dropped = 0  # oldest messages the last turn left out to fit the context
        self._prompt_tokens: int | None = None  # the streaming reply's prompt length, where counted
        self.previews = Previews(self.controller.engine, self.post_message, config.preview)
        self.scope = ScopeActions(self, config.ui.forks)  # scores, probes, forks (#33)
        self.second_engine_factory = second_engine_factory(self.controller.engine, config)
        self.second = SecondModelActions(self)  # a second model reading the chat (#33.5)

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
        self._apply_heat()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._apply_heat())
        self._update_side()
        chat_input = self.query_one(ChatInput)
        draft = load_draft(self.draft_file) if self.draft_file is not None else ""
        if draft.strip():  # the message left unsent at the last quit (#30.6), as data
            chat_input.load_text(pasted(draft))
            chat_input.move_cursor(chat_input.document.end)
        chat_input.focus()

    # --- engine news

    @on(msg.ModelLoadStarted)
    def _load_started(self, event: msg.ModelLoadStarted) -> None:
        self._loading_spec = event.spec
        self.query_one(StatusBar).show_loading(event.spec)

    @on(msg.ModelLoading)
    def _loading(self, event: msg.ModelLoading) -> None:
        fraction = event.progress.fraction
        percent = "" if fraction is None else f" {fraction:.0%}"
        self.query_one(StatusBar).state = f"{event.progress.message}{percent}"

    @on(msg.ContextMeasured)
    def _measured(self, event: msg.ContextMeasured) -> None:
        self.query_one(StatusBar).context_used = event.tokens

    @on(msg.ModelLoaded)
    def _loaded(self, event: msg.ModelLoaded) -> None:
        bar = self.query_one(StatusBar)
        bar.show_model(event.info)
        bar.thinking = self.controller.thinking
        bar.past_thinking = self.controller.past_thinking_label()
        demo = self._loading_spec == DEMO_SPEC
        self.query_one(Transcript).welcome_model(None if demo else event.info.name, plain=not event.info.has_chat_template)
        self.query_one(ParamsPanel).recommended = dict(event.info.recommended)
        if event.info.recommended:
            self.notify("The model recommends sampling settings: the panel shows them; O applies them.", timeout=4)
        for note in event.info.notes:  # e.g. an assumed context limit (plain text: "[model]" is no markup)
            self.notify(note, severity="warning", timeout=15, markup=False)
        conversation = self.controller.conversation
        if any(v.tokens is not None and not v.ids_fit(event.info.path)
               for n in conversation.iter_nodes() for v in n.versions):
            self.notify(f"Now using {event.info.name}: the replies so far continue as text.")
        self.scope.rescore()

    @on(msg.ModelLoadFailed)
    def _load_failed(self, event: msg.ModelLoadFailed) -> None:
        """The engine keeps the model it had (and its cache): the status shows that one again."""
        still = self.controller.engine.model
        bar = self.query_one(StatusBar)
        bar.show_model(still) if still is not None else bar.show_no_model()
        kept = f" Still using {still.name}." if still is not None else ""
        self.notify(f"{event.error}{kept}", title="Model failed to load", severity="error", timeout=30)

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
        self.end_search()  # the chat changes: the matches would be stale
        if event.prompt_tokens is not None:  # "ctx 0/512" said nothing while the first reply streamed
            self.query_one(StatusBar).context_used = event.prompt_tokens
        self.drop_previews()
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
            self.stage_cursor()

    @on(msg.GenerationFinished)
    def _finished(self, event: msg.GenerationFinished) -> None:
        self._end_stream(event.node)
        bar = self.query_one(StatusBar)
        bar.stats = event.stats
        bar.past_thinking = self.controller.past_thinking_label()
        bar.state = ("stopped" if event.reason == "cancelled" else "ready") + self._dropped_note()
        self.scope.rescore()

    @on(msg.GenerationFailed)
    def _failed(self, event: msg.GenerationFailed) -> None:
        if event.node is not None:
            self._end_stream(event.node)
        self.query_one(StatusBar).state = "error"
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
        self.stage_cursor()
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
            why = "No model is loaded: 'Switch model…' in the command palette picks one."
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
        self.preview_cursor(event.node, event.index)
        self.second.token_selected(event.node, event.index)
        self.stage_cursor()

    @on(Transcript.Shown)
    def _shown(self) -> None:
        self.scope.rescore()
        self.second.chat_rested()

    @on(ScoresChanged)
    def _scores_changed(self, event: ScoresChanged) -> None:
        self.scope.scores_changed(event)
        self.second.chat_rested()  # the transcript shows the scored tokens now: map them

    def open_second_model(self) -> None:
        """Pick a model (as Ctrl+O does) to read the chat beside the loaded one."""
        from engine.models import list_local_models
        from tui.app.screens.model_picker import ModelPicker

        def picked(spec: str | None) -> None:
            if spec:
                self.run_worker(self.second.open_model(spec), group="second-model", exclusive=True)
        self.app.push_screen(ModelPicker(list_local_models, None), picked)

    def close_second_model(self) -> None:
        self.run_worker(self.second.close_model(), group="second-model", exclusive=True)

    def second_changed(self) -> None:
        """The second model opened, closed or read the chat anew: the heatmap by disagreement
        takes the new ratios (or, closed, steps back to off)."""
        if self.heat_mode == "disagreement" and not self.second.open:
            self.heat_mode = None
        self._apply_heat()

    def action_probe_phrase(self) -> None:
        self.scope.probe()

    def on_unmount(self) -> None:
        """No score outlives the screen (the engine is closed after it; previews stop likewise)."""
        self.scope.scores.stop()

    @on(msg.CandidateChosen)
    def _candidate_chosen(self, event: msg.CandidateChosen) -> None:
        cursor = self.query_one(Transcript).cursor or self._panel_cursor()
        if cursor is None:
            self.notify("Select a token first (Esc, then ←/→).", severity="warning")
        elif cursor[0].role != "assistant":
            self.notify("This is text the model reads: a branch starts at a reply's token.", severity="warning")
        elif (why := self.controller.branch(cursor[0], cursor[1], event.position,
                                            self.preview_continuation(cursor[0], cursor[1], event.position))) is not None:
            self.notify(why, severity="warning")
        else:
            self.query_one(Transcript).clear()

    @on(msg.CandidateBias)
    def _candidate_bias(self, event: msg.CandidateBias) -> None:
        """Ban / raise / lower a candidate from the next token on; the panel lists the biases by text."""
        token = self.query_one(CandidatesPanel).token
        if token is None or not 0 <= event.position < len(token.candidates):
            return
        candidate = token.candidates[event.position]
        if candidate.id < 0:
            self.notify("This server names tokens by text only: a bias needs an id.", severity="warning")
            return
        self._bias_names[candidate.id] = candidate.text
        params = bias_step(self.controller.params, candidate.id, event.step)
        self.set_params(params)
        value = dict(params.logit_bias).get(candidate.id, 0.0)
        what = "banned" if value <= -100 else f"bias {value:+g}" if value else "no bias"
        self.notify(f"{printable(candidate.text)!r} (id {candidate.id}): {what}", timeout=3)

    def _panel_cursor(self) -> tuple[Node, int] | None:
        """The token the candidates panel shows while none is selected (the newest reply's last),
        so a digit picks from the list on screen rather than failing silently."""
        token = self.query_one(CandidatesPanel).token
        for node in reversed(self.controller.conversation.path()):
            tokens = node.version.tokens or []
            if token is not None and tokens and tokens[-1] is token:
                return node, len(tokens) - 1
        return None

    @on(msg.DraftPaused)
    def _draft_paused(self, event: msg.DraftPaused) -> None:
        self.controller.prepare(draft=event.text, measure=False)  # read a long message ahead while it is written

    @on(Transcript.FlipRequested)
    def _flip(self, event: Transcript.FlipRequested) -> None:
        if self.controller.busy:
            self.notify("A reply is streaming: Esc stops it first.", severity="warning")
        elif not self.controller.flip(event.node, event.step):
            self.app.bell()
        else:
            transcript = self.query_one(Transcript)
            transcript.show(self.controller.conversation)
            transcript.reselect()
            self.controller.prepare()  # the next reply continues the branch now shown

    @on(msg.ParamStep)
    def _param_step(self, event: msg.ParamStep) -> None:
        self.action_step_param(event.name, event.direction)

    @on(msg.ParamEdit)
    def _param_edit(self, event: msg.ParamEdit) -> None:
        self.edit_param(event.name)

    # --- parameters

    def set_params(self, params: SamplingParams, preset: str = "") -> None:
        """Apply at once (a running reply uses them from its next token) and show them: the rows
        that changed flash, or, with the panel out of sight (hidden, or a narrow terminal showing
        the other panel), a short note says what changed. Never silently (#30.1)."""
        old = self.controller.params
        self.controller.set_params(params)
        panel = self.query_one(ParamsPanel)
        panel.params, panel.preset = params, preset
        panel.bias_labels = bias_labels([t for t, _ in params.logit_bias], self._bias_names,
                                        self.controller.conversation)
        changed = [name for name, _label in ALL_PARAMS if getattr(old, name) != getattr(params, name)]
        if panel.region.area:
            panel.flash(frozenset(changed))
        elif changed and not preset:
            labels = dict(ALL_PARAMS)
            self.notify(", ".join(f"{labels[n]} {format_param(params, n)}" for n in changed), timeout=2)

    def action_step_param(self, name: str, direction: int) -> None:
        """Step a parameter (shown by `set_params`)."""
        self.set_params(step_param(self.controller.params, name, direction))

    def action_apply_recommended(self) -> None:
        """The model's own recommended sampling settings (generation_config.json, GGUF metadata)."""
        recommended = self.query_one(ParamsPanel).recommended
        if not recommended:
            self.notify("This model ships no recommended sampling settings.", severity="warning")
            return
        self.set_params(self.controller.params.with_changes(**recommended), "model's")
        self.notify("Applied the model's settings: " + ", ".join(f"{LABELS.get(k, k)} {v}" for k, v in recommended.items()))

    def set_order(self, order: str) -> None:
        """The chain's order from the palette (a preset of `engine.core.params.ORDERS`)."""
        self.set_params(self.controller.params.with_changes(samplers=order))
        self.notify(f"Sampler order: {order}", timeout=2)

    def edit_param(self, name: str) -> None:
        """Ask for an exact value; a value outside the limits is refused in the dialog."""
        if name == "logit_bias":
            self._edit_biases()
            return

        def validate(text: str) -> str | None:
            try:
                parse_param(self.controller.params, name, text)
            except ParamError as exc:
                return str(exc)
            return None

        def done(text: str | None) -> None:
            if text is not None:
                self.set_params(parse_param(self.controller.params, name, text))

        hint = _HINTS.get(name, "")
        label = LABELS.get(name, name)  # as the panel names it: top-p, not top_p
        self.app.push_screen(ValueDialog(f"Set {label}", typed_value(self.controller.params, name), validate, hint),
                             done)

    def action_next_preset(self) -> None:
        names = list(self.config.presets)
        if not names:
            self.notify("No presets in config.", severity="warning")
            return
        name = names[(names.index(self.preset) + 1) % len(names)] if self.preset in names else names[0]
        self.apply_preset(name)

    def apply_preset(self, name: str) -> None:
        self.preset = name
        self.set_params(apply_preset(self.controller.params, self.config.presets[name]), name)
        self.notify(f"Preset: {name}")

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
        if not self.controller.regenerate():
            self.notify(self._why_not_now() or "Nothing to regenerate yet.")

    def action_edit_last(self) -> None:
        user = self.controller.last_user()
        if user is None or not self.controller.can_start:
            self.notify(self._why_not_now() or "No message to edit yet.")
            return
        self.app.push_screen(TextDialog("Edit your last message", user.version.text),
                             lambda text: self._resend(text))

    def _resend(self, text: str | None) -> None:
        if text and text.strip():
            self.query_one(Transcript).clear()
            self.controller.edit_last_user(text.strip())

    def action_toggle_thinking(self) -> None:
        """Each reply keeps the switch it was written under; this sets the next ones'."""
        self.notify(self.controller.toggle_thinking())
        self.query_one(StatusBar).thinking = self.controller.thinking

    def action_toggle_past_thinking(self) -> None:
        """Earlier replies' thinking: exact cache, or as the template renders it (the palette)."""
        self.notify(self.controller.toggle_past_thinking())
        self.query_one(StatusBar).past_thinking = self.controller.past_thinking_label()

    def action_system_prompt(self) -> None:
        def done(text: str | None) -> None:
            if text is not None:
                self.controller.set_system_prompt(text.strip())
                self.query_one(Transcript).show(self.controller.conversation)
                self.controller.prepare()
        self.app.push_screen(TextDialog("System prompt", self.controller.conversation.system_prompt), done)

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

    def _update_side(self) -> None:
        hidden = all(w.has_class("-hidden") for w in (self.query_one(CandidatesPanel), self.query_one(ParamsPanel)))
        self.query_one("#side").set_class(hidden, "-hidden")
