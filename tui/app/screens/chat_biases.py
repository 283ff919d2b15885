"""The chat screen's "Set logit bias" dialog, tokens by id or by text (#32.4).

A mixin so `ChatScreen` stays a router: `edit_param("logit_bias")` comes here. The syntax is
checked in the dialog (`tui.app.bias_entry`); the texts become tokens through the engine when
it is accepted, and a text of several tokens (a phrase) is refused in one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.core.api import EngineError, ParamError
from engine.core.settings import printable
from tui.app.bias_entry import parse_entries, resolve_entries
from tui.app.screens.dialogs import ValueDialog

if TYPE_CHECKING:
    from tui.app.controller import ChatController

HINT = "ID=BIAS or 'TEXT'=BIAS, comma-separated (-100 to 100; 'ban' = -100); empty: no biases"


class BiasActions:
    """Needs `controller`, `_bias_names`, `set_params`, `notify`, `run_worker` and `app` (the screen has them)."""

    controller: ChatController
    _bias_names: dict[int, str]
    app: Any

    def _edit_biases(self) -> None:
        """The biases by id or by text (`tui.app.bias_entry`): the syntax is checked in the dialog,
        the texts are turned into tokens by the engine when it is accepted (a phrase: one line)."""
        def validate(text: str) -> str | None:
            try:
                parse_entries(text)
            except ParamError as exc:
                return str(exc)
            return None

        async def apply(text: str) -> None:
            try:
                params, names = await resolve_entries(self.controller.engine, self.controller.params,
                                                      parse_entries(text))
            except (ParamError, EngineError) as exc:
                self.notify(str(exc), title="Logit bias", severity="warning",  # type: ignore[attr-defined]
                            markup=False)
                return
            self._bias_names.update(names)
            self.set_params(params)  # type: ignore[attr-defined]

        def done(text: str | None) -> None:
            if text is not None:
                self.run_worker(apply(text), group="biases")  # type: ignore[attr-defined]

        current = ", ".join(f"{printable(self._bias_names[t])!r}={'ban' if b <= -100 else f'{b:g}'}"
                            if t in self._bias_names else f"{t}={'ban' if b <= -100 else f'{b:g}'}"
                            for t, b in self.controller.params.logit_bias)
        self.app.push_screen(ValueDialog("Set logit bias", current, validate, HINT), done)

