"""`HeatLegend`: one line saying what the heatmap's colours mean, shown only while it is on.

Without it a colour is a guess: is dark red unlikely or likely, and how unlikely? Each label is
drawn on its own band colour, so the legend is also the colour key. The screen sets `palette`.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from tui.app.widgets.render import HeatPalette

_TITLE = {"p": "heat: p raw ", "entropy": "heat: entropy ", "disagreement": "heat: two models "}
_SHORT_TITLE = {"p": "p ", "entropy": "H ", "disagreement": "Δ "}
_NEXT = {"p": " F3: by entropy", "entropy": " F3: off", "disagreement": " F3: off"}


class HeatLegend(Widget):
    """The bands of the current heat palette, coldest first; hidden while the heatmap is off."""

    DEFAULT_CSS = """
    HeatLegend { height: 1; padding: 0 1; color: $foreground; }
    HeatLegend.-off { display: none; }
    """

    palette: reactive[HeatPalette | None] = reactive(None)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(classes="-off", **kwargs)  # type: ignore[arg-type]

    def watch_palette(self, palette: HeatPalette | None) -> None:
        self.set_class(palette is None, "-off")

    def render(self) -> Text:
        if self.palette is None:
            return Text()
        return legend_text(self.palette, self.size.width)


def legend_text(palette: HeatPalette, width: int = 10_000) -> Text:
    """``heat: p raw  <0.1%  <1%  <10%  <50%  ≥50%  F3: by entropy``, each band label on its
    colour (the text in the theme's own colour, as the tokens have it). Narrower, the F3 hint
    goes, then the title shortens: the bands always show, no word is cut."""
    bands = [(f" {label} ", palette.style(band)) for label, band in palette.legend()]
    width_of_bands = sum(cell_len(label) for label, _style in bands)
    title, hint = _TITLE[palette.by], _NEXT[palette.by]
    if palette.by == "entropy" and palette.ratios:  # a second model is open: F3 goes on to it
        hint = " F3: two models"
    if cell_len(title) + width_of_bands + cell_len(hint) > width:
        hint = ""
    if cell_len(title) + width_of_bands > width:
        title = _SHORT_TITLE[palette.by]
    text = Text()
    text.append(title, style="dim")
    for label, style in bands:
        text.append(label, style=style)
    text.append(hint, style="dim")
    return text
