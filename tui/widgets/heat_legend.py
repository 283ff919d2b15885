"""`HeatLegend`: one line saying what the heatmap's colours mean, shown only while it is on.

Without it a colour is a guess: is dark red unlikely or likely, and how unlikely? Each label is
drawn on its own band colour, so the legend is also the colour key. The screen sets `palette`.
"""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from tui.widgets.render import HeatPalette

_TITLE = {"p": "heat: p raw ", "entropy": "heat: entropy "}
_NEXT = {"p": " F3: by entropy", "entropy": " F3: off"}


class HeatLegend(Static):
    """The bands of the current heat palette, coldest first; hidden while the heatmap is off."""

    DEFAULT_CSS = """
    HeatLegend { height: 1; padding: 0 1; color: $foreground; }
    HeatLegend.-off { display: none; }
    """

    palette: reactive[HeatPalette | None] = reactive(None, layout=True)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(markup=False, classes="-off", **kwargs)  # type: ignore[arg-type]

    def watch_palette(self, palette: HeatPalette | None) -> None:
        self.set_class(palette is None, "-off")
        self.update(legend_text(palette) if palette is not None else "")


def legend_text(palette: HeatPalette) -> Text:
    """``heat: p raw  <0.1%  <1%  <10%  <50%  ≥50%  F3: by entropy``, each band label on its
    colour (the text in the theme's own colour, as the tokens have it)."""
    text = Text()
    text.append(_TITLE[palette.by], style="dim")
    for label, band in palette.legend():
        text.append(f" {label} ", style=palette.style(band))
    text.append(_NEXT[palette.by], style="dim")
    return text
