"""The chat screen's side of a model's load and loss: the status bar while it loads, the welcome
and the model's own notes once it is in, one line when it fails (the old model stays) or when
the engine loses it (its process ended).

A typed helper the chat screen owns (`ChatScreen.model_news`); the screen forwards the
controller's messages to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from engine.core.api import LoadProgress, ModelInfo
from engine.models import DEMO_SPEC
from tui.app.screens.host import ScreenHost
from tui.app.widgets.params_panel import ParamsPanel
from tui.app.widgets.status_bar import StatusBar
from tui.app.widgets.transcript import Transcript

if TYPE_CHECKING:
    from tui.app.controller import ChatController
    from tui.app.screens.chat_scope import ScopeActions


class ModelNewsHost(ScreenHost, Protocol):
    """What the helper needs of the chat screen."""

    controller: ChatController
    scope: ScopeActions


class ModelNews:
    """Shows what the controller says of the model (see the module docstring)."""

    def __init__(self, screen: ModelNewsHost) -> None:
        self.screen = screen
        self.loading_spec = DEMO_SPEC  # the model being loaded: the welcome names it once it is in

    def started(self, spec: str) -> None:
        self.loading_spec = spec
        self.screen.query_one(StatusBar).show_loading(spec)

    def progress(self, progress: LoadProgress) -> None:
        percent = "" if progress.fraction is None else f" {progress.fraction:.0%}"
        self.screen.query_one(StatusBar).state = f"{progress.message}{percent}"

    def loaded(self, info: ModelInfo) -> None:
        screen, controller = self.screen, self.screen.controller
        bar = screen.query_one(StatusBar)
        bar.show_model(info)
        bar.thinking = controller.thinking
        bar.past_thinking = controller.past_thinking_label()
        demo = self.loading_spec == DEMO_SPEC
        screen.query_one(Transcript).welcome_model(None if demo else info.name, plain=not info.has_chat_template)
        screen.query_one(ParamsPanel).recommended = dict(info.recommended)
        if info.recommended:
            screen.notify("The model recommends sampling settings: the panel shows them; O applies them.", timeout=4)
        for note in info.notes:  # e.g. an assumed context limit (plain text: "[model]" is no markup)
            screen.notify(note, severity="warning", timeout=15, markup=False)
        if any(v.tokens is not None and not v.ids_fit(info.path)
               for n in controller.conversation.iter_nodes() for v in n.versions):
            screen.notify(f"Now using {info.name}: the replies so far continue as text.")
        screen.scope.rescore()

    def failed(self, error: str) -> None:
        """The engine keeps the model it had (and its cache): the status shows that one again."""
        still = self.screen.controller.engine.model
        bar = self.screen.query_one(StatusBar)
        bar.show_model(still) if still is not None else bar.show_no_model()
        kept = f" Still using {still.name}." if still is not None else ""
        self.screen.notify(f"{error}{kept}", title="Model failed to load", severity="error", timeout=30)

    def lost(self, why: str) -> None:
        self.screen.query_one(StatusBar).show_no_model()
        self.screen.notify(why, title="Model lost", severity="error", timeout=30)
