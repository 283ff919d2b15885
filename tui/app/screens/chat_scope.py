"""The chat screen's scope actions: the fork thresholds (what f / F stop at and the replies'
headers count), set from the palette and kept by "Save settings".

A helper object the screen owns (`ChatScreen.scope`), not a mixin: it reaches the widgets only
through the screen's public `query_one`, `notify` and `app`, so the screen stays a router.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from engine.core.forks import ENTROPY_LIMIT, ForkRule
from tui.app.screens.dialogs import ValueDialog
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.transcript import Transcript

if TYPE_CHECKING:
    from tui.app.screens.chat import ChatScreen

ForkSetting = Literal["entropy", "margin"]

_FORK_DIALOG: dict[ForkSetting, tuple[str, float, str]] = {
    "entropy": ("Fork: entropy above (nats)", ENTROPY_LIMIT,
                "a token is a fork when its entropy is above this; 0 = not by entropy"),
    "margin": ("Fork: top two closer than (probability)", 1.0,
               "a token is a fork when its top two raw probabilities are closer than this "
               "(0.1 = 10 points); 0 = not by margin"),
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


class ScopeActions:
    """What the screen delegates about inspecting tokens beyond the candidates: forks (#33.4)."""

    def __init__(self, screen: ChatScreen, forks: ForkRule) -> None:
        self.screen = screen
        self.forks = forks

    def mounted(self) -> None:
        """The transcript takes the configured rule."""
        self.screen.query_one(Transcript).set_forks(self.forks)
        self.screen.query_one(CandidatesPanel).forks = self.forks

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
        return {"fork_entropy": self.forks.entropy, "fork_margin": self.forks.margin}
