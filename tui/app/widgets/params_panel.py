"""The live sampling parameters. Shows `params`; keys post `ParamStep` / `ParamEdit` up.

A parameter that changes is flashed (`flash`): a letter typed into the transcript steps a
parameter, and a change nobody sees happen is a setting silently lost (#30.1).
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.reactive import reactive
from textual.timer import Timer
from textual.widget import Widget

from engine.core.api import SamplingParams
from tui.app.bindings import PARAM_KEYS, bindings_for
from tui.app.messages import ParamEdit, ParamStep
from engine.core.param_steps import format_param, visible_params
from engine.core.params import BAN
from engine.core.settings import printable
from tui.app.safe_text import literal

FLASH_S = 1.2  # how long a changed row stays marked
BIAS_ROWS = 4  # the biases listed one per row; beyond that a row says how many more

def _short(text: str, width: int) -> str:
    """One panel cell: long orders and bias lists end in an ellipsis (the palette shows them whole)."""
    return text if len(text) <= width else text[: width - 1] + "…"


class ParamsPanel(Widget, can_focus=True):
    """One row per parameter; the selected row can be stepped or typed."""

    DEFAULT_CSS = """
    ParamsPanel { height: auto; border: round $border-blurred; padding: 0 1; }
    ParamsPanel:focus { border: round $border; }
    """
    BINDINGS = bindings_for("params")

    params: reactive[SamplingParams] = reactive(SamplingParams, layout=True)  # rows come and go with the stages in force
    selected: reactive[int] = reactive(0)
    preset: reactive[str] = reactive("")
    flashed: reactive[frozenset[str]] = reactive(frozenset)  # rows marked because they just changed

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._unflash: Timer | None = None

    def on_mount(self) -> None:
        self.border_title = "parameters"

    def flash(self, names: frozenset[str]) -> None:
        """Mark these rows for `FLASH_S` (a new change restarts the time)."""
        if not names:
            return
        if self._unflash is not None:
            self._unflash.stop()
        self.flashed = names
        self._unflash = self.set_timer(FLASH_S, self._clear_flash)

    def _clear_flash(self) -> None:
        self._unflash = None
        self.flashed = frozenset()

    def watch_preset(self, preset: str) -> None:
        """A preset's name comes from the config: a border title given a str reads it as markup."""
        self.border_subtitle = literal(preset) if preset else None

    def _keys(self, name: str, key: str) -> str:
        """The keys that step `name` down / up as bound now: `[keys]` may have moved them (#30.7;
        the column read "t/T" whatever the keymap said)."""
        keymap = getattr(self.app, "keymap", None) or {}
        shown = []
        for suffix, default in (("down", key), ("up", key.upper())):
            bound = str(keymap.get(f"param.{name}.{suffix}", default)).split(",")[0].strip()
            shown.append(self.app.get_key_display(Binding(bound, "")) if bound else "")
        return "/".join(shown)

    def render(self) -> RenderableType:
        table = Table.grid(padding=(0, 1))
        table.add_column(style="dim")
        table.add_column()
        table.add_column(justify="right")
        table.add_column(style="dim")  # "(off)" in a column of its own: the values never move
        shows = bool(self.recommended)
        if shows:
            table.add_column(style="italic dim")  # the model's recommended value, where it ships one
        rows = visible_params(self.params)
        for i, (name, label) in enumerate(rows):
            key = PARAM_KEYS.get(name)
            style = "reverse" if i == self.selected % len(rows) and self.has_focus else ""
            value, _, note = format_param(self.params, name).partition(" (")
            shipped = self.recommended.get(name)
            shown = Text(value, style="bold reverse") if name in self.flashed else value
            cells = [self._keys(name, key) if key else "", Text(label, style=style), shown, f"({note}" if note else ""]
            if shows:
                cells.append("" if shipped is None else f"model: {shipped:g}" if isinstance(shipped, float)
                             else f"model: {shipped}")
            table.add_row(*cells)
        # the chain's order, and the biases: set from the palette ("Sampler order", "Set logit bias")
        table.add_row("", Text("order"), Text(_short(format_param(self.params, "samplers"), 18)), "", *[""] * shows)
        biases = self.params.logit_bias
        for i, (token, bias) in enumerate(biases[:BIAS_ROWS]):  # one row each: the token's text and id, the value
            name = self.bias_labels.get(token)
            label = f"{printable(name)!r} #{token}" if name is not None else f"#{token}"
            if i == BIAS_ROWS - 1 and len(biases) > BIAS_ROWS:
                label, value = f"+{len(biases) - i} more (palette)", ""
            else:
                value = "ban" if bias <= BAN else f"{bias:+g}"
            table.add_row("", Text("bias" if i == 0 else ""), Text(_short(label, 18), justify="left"),
                          Text(value, style="dim"), *[""] * shows)
        return table

    recommended: reactive[dict] = reactive(dict, layout=True)  # the model's own settings (name -> value)
    bias_labels: reactive[dict] = reactive(dict, layout=True)  # token id -> its text, where the screen found it

    @property
    def selected_name(self) -> str:
        rows = visible_params(self.params)
        return rows[self.selected % len(rows)][0]

    def action_select(self, step: int) -> None:
        self.selected = (self.selected + step) % len(visible_params(self.params))

    def action_step(self, direction: int) -> None:
        self.post_message(ParamStep(self.selected_name, direction))

    def action_edit(self) -> None:
        self.post_message(ParamEdit(self.selected_name))

    def action_focus_input(self) -> None:
        self.screen.focus_next("ChatInput")

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
