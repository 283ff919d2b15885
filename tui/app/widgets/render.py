"""Pure rendering helpers: token text for display, probability colours and bars.

Kept apart from the widgets so they can be tested without an app and reused by the panels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal, Mapping, Sequence

from rich.style import Style
from rich.text import Text
from textual.color import Color

from engine.core.api import TokenEvent
from tui.app.contrast import blend_stops, heat_bands
from tui.app.safe_text import printable
from tui.app.widgets.markdown_marks import Role

_VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}


def visible(text: str) -> str:
    """Whitespace made visible, so a candidate of " " or "\\n" can be told apart from nothing;
    control characters as everywhere else (`printable`: ESC is ␛, as in the transcript), any
    other invisible character by its escape (a zero-width space is ``\\u200b``)."""
    if text == "":
        return "∅"
    return "".join(_VISIBLE[ch] if ch in _VISIBLE else ch if ch.isprintable()
                   else printable(ch) if ord(ch) < 0xA0 else repr(ch)[1:-1] for ch in text)


def prob(logprob: float) -> float:
    return math.exp(logprob)


def percent(p: float, precise: bool = False) -> str:
    """A probability for a person: ``18.7%``; below a tenth of a percent ``<0.1%``, or with
    `precise` the value itself in scientific form (``3.2e-5``), never ``0.0%``, which reads as
    "impossible" for a token that was just sampled. ``0%`` only for exactly 0; ``?`` for NaN."""
    if not math.isfinite(p):
        return "?"
    p = unit(p)
    if p >= 0.001:
        return f"{p:.1%}"
    if p == 0:
        return "0%"
    return scientific(p) if precise else "<0.1%"


def scientific(p: float) -> str:
    """``3.2e-5``: two significant digits, the exponent without padding."""
    mantissa, exponent = f"{p:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def safe_log(p: float) -> float:
    """log p for any number a remote engine may send: -inf for 0, NaN for what is no probability."""
    if p > 0:
        return math.log(p)
    return -math.inf if p == 0 else math.nan


def log_text(logprob: float) -> str:
    """A natural-log probability: ``-1.68``; ``-inf`` for a candidate that cannot be drawn."""
    if math.isnan(logprob):
        return "?"
    return "-inf" if logprob == -math.inf else f"{logprob:.2f}"


# Where the heat bands part, coldest (index 0) to warmest: a token's band is the number of
# limits it reaches. Probability on a log scale (decades), so 0.01%, 0.5% and 18.7% differ;
# entropy in nats, where low entropy (a sure model) is the warm end.
P_LIMITS = (0.001, 0.01, 0.1, 0.5)
ENTROPY_LIMITS = (3.0, 2.0, 1.0, 0.5)  # reached when the entropy is *below* the limit
RATIO_LIMITS = (0.25, 0.5, 1.0, 2.0)  # |log p_first - log p_second| in nats, reached = colder
HEAT_BANDS = len(P_LIMITS) + 1
HeatMode = Literal["p", "entropy", "disagreement"]


@dataclass(frozen=True)
class HeatPalette:
    """The heatmap's colours (token backgrounds) and what they show, made once per theme
    change rather than per token.

    Five bands, not a blend: a blend of dark colours collapses into one colour in a 256-colour
    terminal (18.7%, 0.5% and 0.01% all showed one dark red), while five bands, each chosen to
    stay its own colour there (`tui.app.contrast.heat_bands`), read the same in every terminal and
    match the legend exactly.
    """

    low: Color
    mid: Color
    high: Color
    by: HeatMode = "p"
    bands: tuple[Color, ...] = ()  # coldest first; made evenly from low/mid/high when empty
    inks: tuple[Color | None, ...] = ()  # the text colour on each band (None: the theme's own)
    # by "disagreement": each compared token's |log-ratio| between two models, by id(token)
    ratios: Mapping[int, float] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if len(self.bands) != HEAT_BANDS:
            object.__setattr__(self, "bands", tuple(blend_stops((self.low, self.mid, self.high), HEAT_BANDS)))
        if len(self.inks) != HEAT_BANDS:
            object.__setattr__(self, "inks", (None,) * HEAT_BANDS)

    def band(self, p: float) -> int:
        """The band of probability `p`; a value that is not a probability (NaN from a broken
        model) is the coldest, never breaks rendering."""
        p = unit(p)
        return sum(p >= limit for limit in P_LIMITS)

    def entropy_band(self, entropy: float | None) -> int | None:
        """The band of a position's entropy: the surer the model (lower entropy), the warmer.
        NaN counts as the least sure; an unknown entropy (a remote engine's) has no band."""
        if entropy is None:
            return None
        if not math.isfinite(entropy):
            return 0
        return sum(entropy < limit for limit in ENTROPY_LIMITS)

    def token_band(self, token: TokenEvent) -> int | None:
        """The band of one token, by its probability, its position's entropy, or how much two
        models disagree on it (a token not compared has no band)."""
        if self.by == "disagreement":
            ratio = self.ratios.get(id(token))
            if ratio is None:
                return None
            return HEAT_BANDS - 1 - sum(not ratio < limit for limit in RATIO_LIMITS)  # NaN: the coldest
        return self.entropy_band(token.entropy) if self.by == "entropy" else self.band(prob(token.logprob))

    def colour(self, p: float) -> Color:
        """The heat colour of probability `p`."""
        return self.bands[self.band(p)]

    def token_colour(self, token: TokenEvent) -> Color | None:
        """The heat colour of one token (None: no colour, its entropy is unknown)."""
        band = self.token_band(token)
        return None if band is None else self.bands[band]

    def style(self, band: int) -> Style:
        """The rich style of a band: its background, and its text colour where the theme's own
        is too faint on it."""
        ink = self.inks[band]
        return Style(bgcolor=self.bands[band].rich_color, color=ink.rich_color if ink else None)

    def legend(self) -> list[tuple[str, int]]:
        """(label, band) per band, coldest first: what the legend line shows."""
        if self.by == "entropy":
            labels = ["≥3", "<3", "<2", "<1", "<0.5 nats"]
        elif self.by == "disagreement":
            labels = ["≥2", "<2", "<1", "<0.5", "<0.25 nats apart"]
        else:
            labels = ["<0.1%", "<1%", "<10%", "<50%", "≥50%"]
        return list(zip(labels, range(HEAT_BANDS)))

    def switched(self, by: HeatMode, ratios: Mapping[int, float] | None = None) -> "HeatPalette":
        """The same colours showing another measure (and, for "disagreement", these ratios)."""
        return replace(self, by=by, ratios=self.ratios if ratios is None else ratios)

    @classmethod
    def from_variables(cls, variables: dict[str, str], by: HeatMode = "p") -> "HeatPalette":
        """From a theme's variables: its three heat stops, with the bands made readable on its
        text colour and distinct in 256 colours."""
        def pick(name: str, default: str) -> Color:
            try:
                return Color.parse(variables.get(name, default))
            except Exception:  # a bad theme value falls back, it never breaks rendering
                return Color.parse(default)
        low, mid, high = pick("heat-low", "#6b2230"), pick("heat-mid", "#5a4716"), pick("heat-high", "#1d4a2c")
        bands = heat_bands((low, mid, high), pick("foreground", "#d8dee9"), HEAT_BANDS)
        return cls(low, mid, high, by, tuple(b for b, _ink in bands), tuple(ink for _b, ink in bands))


def token_display(token: TokenEvent) -> str:
    """What a token adds to the flowing text, whether or not the cursor is on it: the reply
    is laid out once, and the cursor only restyles it (a selected blank token used to show
    its glyphs, which re-wrapped its paragraph). Control characters are made visible (a token
    may hold a terminal escape), so token offsets match the text on screen."""
    return printable(token.text)


def cursor_cell(tokens: Sequence[TokenEvent], cursor: int, end: int) -> int:
    """The token whose text the cursor lights when it is on token `cursor` (looking no further
    than `end`): itself, or, for a token that adds no text (the first bytes of a character split
    over byte tokens), the token that completes that character, so the character it is part
    of lights up, whole. Itself when no later token adds text."""
    for index in range(cursor, min(end, len(tokens))):
        if tokens[index].text:
            return index
    return cursor


def mark_style(role: Role, variables: dict[str, str], colours: bool = True) -> Style:
    """How a Markdown construct is highlighted in place, in the theme's colours (markers dim).
    Without `colours` (the heatmap is on: its bands choose the text colour, readable on each)
    only bold, italic and underline stay."""
    def colour(name: str) -> str | None:
        value = variables.get(name)
        try:
            return Color.parse(value).rich_color.name if value else None
        except Exception:  # a bad theme value: no colour, never a broken render
            return None
    styles = {
        "marker": Style(dim=True), "strong": Style(bold=True), "emph": Style(italic=True),
        "heading": Style(bold=True, color=colour("markdown-h1-color") or colour("text-primary")),
        "code": Style(color=colour("text-accent")), "bullet": Style(bold=True, color=colour("text-primary")),
        "quote": Style(italic=True), "link": Style(underline=True, color=colour("text-primary")),
        # fenced code by language (`code_colours`)
        "kw": Style(bold=True, color=colour("text-primary")), "str": Style(color=colour("text-success")),
        "comment": Style(italic=True, dim=True), "num": Style(color=colour("text-warning")),
        "name": Style(color=colour("text-secondary")),
    }
    style = styles[role]
    return style if colours else Style(bold=style.bold, italic=style.italic, underline=style.underline)


def token_style(token: TokenEvent, index: int, selected: bool, heat: HeatPalette | None) -> Style:
    """A token's style: its index as click metadata, its heat colour, the cursor's highlight."""
    style = Style(meta={"token": index})
    band = heat.token_band(token) if heat is not None else None
    if heat is not None and band is not None:
        style += heat.style(band)
    if selected:
        style += Style(reverse=True, bold=True, underline=True)
    return style


def render_tokens(tokens: list[TokenEvent], start: int, lit: int | None, heat: HeatPalette | None,
                  marks: Sequence[tuple[int, int, Style]] = ()) -> Text:
    """Tokens [start:] as one Text; each span carries its index as click metadata. `lit`: the
    token the cursor lights; `marks`: styles by text offset (Markdown), under the tokens' own."""
    text = Text()
    for offset, token in enumerate(tokens):
        index = start + offset
        text.append(token_display(token), token_style(token, index, index == lit, heat))
    for mark_start, mark_end, style in reversed(marks):
        text.stylize_before(style, mark_start, mark_end)
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
