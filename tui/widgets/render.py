"""Pure rendering helpers: token text for display, probability colours and bars.

Kept apart from the widgets so they can be tested without an app and reused by the panels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.color import Color

from engine.api import TokenEvent
from tui.safe_text import printable

_VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}


def visible(text: str) -> str:
    """Whitespace made visible, so a candidate of " " or "\\n" can be told apart from nothing."""
    if text == "":
        return "∅"
    return "".join(_VISIBLE.get(ch, ch) if ch in _VISIBLE else (ch if ch.isprintable() else repr(ch)[1:-1])
                   for ch in text)


def prob(logprob: float) -> float:
    return math.exp(logprob)


@dataclass(frozen=True)
class HeatPalette:
    """The three theme colours of the heatmap (token backgrounds), parsed once per theme change
    rather than per token; probabilities in between are blended like `tui.themes.heat_colour`."""

    low: Color
    mid: Color
    high: Color

    def colour(self, p: float) -> Color:
        """The heat of probability `p`; a value that is not a probability (NaN from a broken
        model or a remote engine) shows as the coldest, never breaks rendering."""
        p = unit(p)
        if p < 0.5:
            return self.low.blend(self.mid, p / 0.5)
        return self.mid.blend(self.high, (p - 0.5) / 0.5)

    @classmethod
    def from_variables(cls, variables: dict[str, str]) -> "HeatPalette":
        def pick(name: str, default: str) -> Color:
            try:
                return Color.parse(variables.get(name, default))
            except Exception:  # a bad theme value falls back, it never breaks rendering
                return Color.parse(default)
        return cls(pick("heat-low", "#6b2230"), pick("heat-mid", "#5a4716"), pick("heat-high", "#1d4a2c"))


def token_display(token: TokenEvent, selected: bool) -> str:
    """What a token adds to the flowing text. A selected empty or whitespace-only token shows
    its piece visibly so the cursor never sits on nothing. Control characters are made visible
    (a token may hold a terminal escape), so token offsets match the text on screen."""
    if selected and token.text.strip() == "":
        return visible(token.piece or token.text) + ("\n" if "\n" in token.text else "")
    return printable(token.text)


def token_style(token: TokenEvent, index: int, selected: bool, heat: HeatPalette | None) -> Style:
    """A token's style: its index as click metadata, its heat colour, the cursor's highlight."""
    style = Style(meta={"token": index})
    if heat is not None:
        style += Style(bgcolor=heat.colour(prob(token.logprob)).rich_color)
    if selected:
        style += Style(reverse=True, bold=True, underline=True)
    return style


def render_tokens(tokens: list[TokenEvent], start: int, cursor: int | None,
                  heat: HeatPalette | None) -> Text:
    """Tokens [start:] as one Text; each span carries its index as click metadata."""
    text = Text()
    for offset, token in enumerate(tokens):
        index = start + offset
        selected = index == cursor
        text.append(token_display(token, selected), token_style(token, index, selected, heat))
    if text.plain.endswith("\n"):
        text.right_crop(1)  # the next chunk starts on a new line anyway
    return text


def unit(p: float) -> float:
    """`p` clamped to [0, 1]; NaN and infinities (not probabilities) count as 0."""
    return max(0.0, min(1.0, p)) if math.isfinite(p) else 0.0


def bar(p: float, width: int) -> str:
    """A probability bar in eighth blocks."""
    eighths = round(unit(p) * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (" ▏▎▍▌▋▊▉"[part] if part else "")).ljust(width)
