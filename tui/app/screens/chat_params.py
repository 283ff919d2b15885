"""The sampling parameters from the chat screen: a key steps one, a dialog takes an exact value,
a preset or the model's recommended settings set several, the candidates panel bans or biases a
token; every change applies at once (a running reply uses it from its next token) and is shown
where it changed (`set_params`: the panel's rows flash, or a short note when the panel is out of
sight; never silently, #30.1), and, mid-reply on an engine that takes them only from the next
reply (`Abilities.live_params`), when it applies.

A helper the chat screen owns (`ChatScreen.param_actions`), typed by what it needs (`ParamsHost`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from engine.core.api import ParamError, SamplingParams
from engine.core.param_steps import (
    ALL_PARAMS, LABELS, apply_preset, bias_step, format_param, parse_param, step_param, typed_value,
)
from engine.core.settings import Config, printable
from tui.app.bias_labels import bias_labels
from tui.app.screens.chat_biases import BiasActions
from tui.app.screens.dialogs import ValueDialog
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.params_panel import ParamsPanel
from tui.app.screens.host import ScreenHost

if TYPE_CHECKING:
    from tui.app.controller import ChatController


HINTS = {
    "seed": "empty or 'random' = a fresh seed each turn",
    "dry_sequence_breakers": "comma-separated; \\n = line break, \\, = comma; 'none': no breakers",
    "samplers": "llama.cpp, mlx-lm, logitscope, or stage names joined by ';'",
    "mirostat": "0 = off, 2 = mirostat v2",
}


class ParamsHost(ScreenHost, Protocol):
    """What the parameter actions need of the chat screen."""

    controller: ChatController
    config: Config


class ParamActions:
    """The chat screen's parameter changes (see the module docstring)."""

    def __init__(self, screen: ParamsHost) -> None:
        self.screen = screen
        self.preset = ""  # the preset last applied (F-key cycling starts after it)
        self.bias_names: dict[int, str] = {}  # token id -> its text, for the panel's list of biases
        self.biases = BiasActions(screen, self)  # the "Set logit bias" dialog, tokens by id or by text

    def set_params(self, params: SamplingParams, preset: str = "") -> None:
        """Apply at once (a running reply uses them from its next token) and show them: the rows
        that changed flash, or, with the panel out of sight (hidden, or a narrow terminal showing
        the other panel), a short note says what changed. Never silently (#30.1)."""
        controller = self.screen.controller
        old = controller.params
        controller.set_params(params)
        panel = self.screen.query_one(ParamsPanel)
        panel.params, panel.preset = params, preset
        panel.bias_labels = bias_labels([t for t, _ in params.logit_bias], self.bias_names, controller.conversation)
        changed = [name for name, _label in ALL_PARAMS if getattr(old, name) != getattr(params, name)]
        model = controller.engine.model
        if changed and controller.busy and model is not None and not controller.live_params:
            why = model.abilities.reason("live_params") or "This engine takes new settings from the next reply."
            self.screen.notify(why, timeout=4)
        if panel.region.area:
            panel.flash(frozenset(changed))
        elif changed and not preset:
            labels = dict(ALL_PARAMS)
            self.screen.notify(", ".join(f"{labels[n]} {format_param(params, n)}" for n in changed), timeout=2)

    def step(self, name: str, direction: int) -> None:
        self.set_params(step_param(self.screen.controller.params, name, direction))

    def bias(self, position: int, step: float | None) -> None:
        """Ban / raise / lower candidate `position` of the panel's token from the next token on;
        the panel lists the biases by text."""
        token = self.screen.query_one(CandidatesPanel).token
        if token is None or not 0 <= position < len(token.candidates):
            return
        candidate = token.candidates[position]
        if candidate.id < 0:
            self.screen.notify("This server names tokens by text only: a bias needs an id.", severity="warning")
            return
        self.bias_names[candidate.id] = candidate.text
        params = bias_step(self.screen.controller.params, candidate.id, step)
        self.set_params(params)
        value = dict(params.logit_bias).get(candidate.id, 0.0)
        what = "banned" if value <= -100 else f"bias {value:+g}" if value else "no bias"
        self.screen.notify(f"{printable(candidate.text)!r} (id {candidate.id}): {what}", timeout=3)

    def apply_recommended(self) -> None:
        """The model's own recommended sampling settings (generation_config.json, GGUF metadata)."""
        recommended = self.screen.query_one(ParamsPanel).recommended
        if not recommended:
            self.screen.notify("This model ships no recommended sampling settings.", severity="warning")
            return
        self.set_params(self.screen.controller.params.with_changes(**recommended), "model's")
        self.screen.notify("Applied the model's settings: " + ", ".join(f"{LABELS.get(k, k)} {v}"
                                                                        for k, v in recommended.items()))

    def set_order(self, order: str) -> None:
        """The chain's order from the palette (a preset of `engine.core.params.ORDERS`)."""
        self.set_params(self.screen.controller.params.with_changes(samplers=order))
        self.screen.notify(f"Sampler order: {order}", timeout=2)

    def edit(self, name: str) -> None:
        """Ask for an exact value; a value outside the limits is refused in the dialog (the biases
        have a dialog of their own: `chat_biases`)."""
        if name == "logit_bias":
            self.biases.edit()
            return
        controller = self.screen.controller

        def validate(text: str) -> str | None:
            try:
                parse_param(controller.params, name, text)
            except ParamError as exc:
                return str(exc)
            return None

        def done(text: str | None) -> None:
            if text is not None:
                self.set_params(parse_param(controller.params, name, text))

        label = LABELS.get(name, name)  # as the panel names it: top-p, not top_p
        self.screen.app.push_screen(ValueDialog(f"Set {label}", typed_value(controller.params, name), validate,
                                                HINTS.get(name, "")), done)

    def next_preset(self) -> None:
        names = list(self.screen.config.presets)
        if not names:
            self.screen.notify("No presets in config.", severity="warning")
            return
        name = names[(names.index(self.preset) + 1) % len(names)] if self.preset in names else names[0]
        self.apply_preset(name)

    def apply_preset(self, name: str) -> None:
        self.preset = name
        self.set_params(apply_preset(self.screen.controller.params, self.screen.config.presets[name]), name)
        self.screen.notify(f"Preset: {name}")
