"""The chat screen's "Set logit bias" dialog, tokens by id or by text (#32.4).

A helper of the parameter actions (`ParamActions.biases`): `edit_param("logit_bias")` comes here.
The syntax is checked in the dialog (`tui.app.bias_entry`); the texts become tokens through the
engine when it is accepted, and a text of several tokens (a phrase) is refused in one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from engine.core.api import EngineError, ParamError, SamplingParams
from engine.core.settings import printable
from tui.app.bias_entry import parse_entries, resolve_entries
from tui.app.screens.dialogs import ValueDialog
from tui.app.screens.host import ScreenHost

if TYPE_CHECKING:
    from tui.app.controller import ChatController

HINT = "ID=BIAS or 'TEXT'=BIAS, comma-separated (-100 to 100; 'ban' = -100); empty: no biases"


class BiasHost(ScreenHost, Protocol):
    """What the bias dialog needs of the chat screen."""

    controller: ChatController


class BiasSetter(Protocol):
    """Where the biases go: the parameter actions (`ParamActions`), which name them by text."""

    bias_names: dict[int, str]

    def set_params(self, params: SamplingParams, preset: str = "") -> None: ...


class BiasActions:
    """The bias dialog (see the module docstring)."""

    def __init__(self, screen: BiasHost, params: BiasSetter) -> None:
        self.screen = screen
        self.params = params

    def edit(self) -> None:
        """The biases by id or by text (`tui.app.bias_entry`): the syntax is checked in the dialog,
        the texts are turned into tokens by the engine when it is accepted (a phrase: one line)."""
        controller = self.screen.controller
        names = self.params.bias_names

        def validate(text: str) -> str | None:
            try:
                parse_entries(text)
            except ParamError as exc:
                return str(exc)
            return None

        async def apply(text: str) -> None:
            try:
                params, found = await resolve_entries(controller.engine, controller.params, parse_entries(text))
            except (ParamError, EngineError) as exc:
                self.screen.notify(str(exc), title="Logit bias", severity="warning", markup=False)
                return
            names.update(found)
            self.params.set_params(params)

        def done(text: str | None) -> None:
            if text is not None:
                self.screen.run_worker(apply(text), group="biases")

        current = ", ".join(f"{printable(names[t])!r}={'ban' if b <= -100 else f'{b:g}'}"
                            if t in names else f"{t}={'ban' if b <= -100 else f'{b:g}'}"
                            for t, b in controller.params.logit_bias)
        self.screen.app.push_screen(ValueDialog("Set logit bias", current, validate, HINT), done)
