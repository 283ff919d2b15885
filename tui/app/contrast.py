"""Colour maths for readable screens: WCAG contrast, what a 256-colour terminal shows, and heat
colours that stay readable and distinct in both.

Why a module of its own: a theme's colours are designed in truecolor, but tmux and Terminal.app
default to 256 colours, where Rich maps every colour to the nearest cell of the xterm palette.
Dark, close colours (a heatmap's backgrounds, a blurred border) then collapse into one cell, or
onto black. Everything here is pure (no app), so a test can check every theme in both modes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cache

from rich.color import Color as RichColor
from rich.color import ColorSystem
from textual.color import Color, rgb_to_lab
from textual.theme import Theme

TEXT_ON_HEAT = 4.5  # WCAG AA for normal text: a token's text on its heat background
CUBE = range(16, 232)  # the xterm 6x6x6 colour cube (the 16 system colours vary by terminal)


def luminance(colour: Color) -> float:
    """WCAG relative luminance of an opaque colour, 0 (black) to 1 (white)."""

    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(colour.r) + 0.7152 * linear(colour.g) + 0.0722 * linear(colour.b)


def contrast(a: Color, b: Color) -> float:
    """WCAG contrast ratio of two colours, 1 (same) to 21 (black on white)."""
    low, high = sorted((luminance(a), luminance(b)))
    return (high + 0.05) / (low + 0.05)


def eight_bit(colour: Color) -> int:
    """The xterm palette index a 256-colour terminal shows for `colour` (Rich's own reduction,
    the one Textual's output goes through)."""
    number = RichColor.from_rgb(colour.r, colour.g, colour.b).downgrade(ColorSystem.EIGHT_BIT).number
    return int(number or 0)


def palette_colour(index: int) -> Color:
    """The colour of xterm palette entry `index` (16..255, the entries every terminal agrees on)."""
    triplet = RichColor.from_ansi(index).get_truecolor()
    return Color(triplet.red, triplet.green, triplet.blue)


def reduced(colour: Color) -> Color:
    """`colour` as a 256-colour terminal shows it."""
    return palette_colour(eight_bit(colour))


def worst_contrast(a: Color, b: Color) -> float:
    """The lower of the truecolor and 256-colour contrasts of `a` on `b`."""
    return min(contrast(a, b), contrast(reduced(a), reduced(b)))


def distance(a: Color, b: Color) -> float:
    """Perceptual distance (CIE76 delta E in Lab): about 2.3 is the smallest difference seen."""
    la, lb = rgb_to_lab(a), rgb_to_lab(b)
    return float(((la.L - lb.L) ** 2 + (la.a - lb.a) ** 2 + (la.b - lb.b) ** 2) ** 0.5)


def blend_stops(stops: Sequence[Color], count: int) -> list[Color]:
    """`count` colours evenly along the piecewise-linear path through `stops` (first and last
    included exactly)."""
    out = []
    for n in range(count):
        t = n / (count - 1) * (len(stops) - 1)
        i = min(int(t), len(stops) - 2)
        out.append(stops[i].blend(stops[i + 1], t - i))
    return out


HeatBand = tuple[Color, "Color | None"]  # a background, and the text colour on it (None: the theme's)
NEAR = 25.0  # delta E: a cube colour this close still reads as the theme's own
INKS = (Color(255, 255, 255), Color(0, 0, 0))


def heat_bands(stops: Sequence[Color], text: Color, count: int = 5) -> tuple[HeatBand, ...]:
    """`count` heat colours along `stops` that text is readable on and that a 256-colour
    terminal shows as `count` different colours.

    A band keeps the theme's own colour when that already holds in both modes; otherwise it
    becomes the nearest (in Lab) colour of the xterm cube that does, which a 256-colour terminal
    shows exactly. So a theme designed in truecolor looks as designed there, and a heatmap in
    tmux still tells 0.01%, 0.5% and 18.7% apart. Where the theme's text is too faint for any
    nearby colour (solarized-dark's grey text), that band's text is drawn white or black.
    """
    targets = blend_stops(stops, count)
    bands: dict[int, HeatBand] = {}
    used: set[int] = set()
    for n in _anchors_first(count):  # the theme's own stops get first pick of the cells
        bands[n] = _band(targets[n], text, used)
        used.add(eight_bit(bands[n][0]))
    return tuple(bands[n] for n in range(count))


def _band(target: Color, text: Color, used: set[int]) -> HeatBand:
    """The first that works: `target` under the theme's text, a near cube colour under it,
    `target` under white or black, the nearest cube colour under white or black."""
    if _shows_well(target, text, used):
        return target, None
    near = _nearest(target, text, used)
    if near is not None and distance(near, target) <= NEAR:
        return near, None
    for ink in sorted(INKS, key=lambda ink: -worst_contrast(ink, target)):
        if _shows_well(target, ink, used):
            return target, ink
    options = [(c, ink) for ink in INKS if (c := _nearest(target, ink, used)) is not None]
    return min(options, key=lambda o: distance(o[0], target)) if options else (target, None)


def _anchors_first(count: int) -> list[int]:
    """Band order for choosing: both ends, the middle, then the rest."""
    first = [0, count - 1, (count - 1) // 2]
    return list(dict.fromkeys(first + list(range(count))))


def _shows_well(colour: Color, text: Color, used: set[int]) -> bool:
    """Readable in both modes, and a colour (not grey) of its own in 256 colours."""
    cell = reduced(colour)
    return (eight_bit(colour) not in used and len({cell.r, cell.g, cell.b}) > 1
            and worst_contrast(text, colour) >= TEXT_ON_HEAT)


def _nearest(target: Color, text: Color, used: set[int]) -> Color | None:
    """The cube colour nearest to `target` that `text` is readable on and not yet used."""
    options = [c for c in _hues() if _shows_well(c, text, used)]
    return min(options, key=lambda c: distance(c, target)) if options else None


@cache
def _hues() -> tuple[Color, ...]:
    """The cube's colours that are not grey (a grey heat band reads as "no colour"), computed once."""
    cube = (palette_colour(i) for i in CUBE)
    return tuple(c for c in cube if len({c.r, c.g, c.b}) > 1)


def readable(colour: Color, grounds: Sequence[Color], ratio: float) -> Color:
    """`colour`, or the nearest shade of it (lighter on a dark ground, darker on a light one)
    that has `ratio` against every ground in truecolor and in 256 colours; white or black when
    no shade does."""
    dark = luminance(grounds[0]) < 0.5
    for step in range(41):
        shade = colour if step == 0 else colour.lighten(step * 0.025) if dark else colour.darken(step * 0.025)
        if all(worst_contrast(shade, ground) >= ratio for ground in grounds):
            return shade
    return Color(255, 255, 255) if dark else Color(0, 0, 0)


# What each app colour is derived from when a theme leaves it out, and the contrast it needs
# against the background and the surface: text 4.5:1, borders and bars 3:1 (WCAG 1.4.11).
# Textual's own `border-blurred` (surface darkened 2.5%) measured 1.0 to 1.2:1 on most themes.
DERIVED = {"prob-bar": "primary", "prob-bar-sampled": "success", "chosen-token": "accent"}
NEEDED = {"prob-bar": 3.0, "prob-bar-sampled": 3.0, "chosen-token": TEXT_ON_HEAT,
          "border": 3.0, "border-blurred": 3.0}


def readable_theme(theme: Theme, fallback: Mapping[str, str]) -> Theme:
    """`theme` with every colour logitscope needs, and every border, bar and highlight readable
    on its background and surface in truecolor and in 256 colours.

    Missing heat colours come from `fallback` (our dark or light theme's: the bands are made
    readable on the theme's text when drawn); missing bar colours from the theme's own primary,
    success and accent. A theme of ANSI colours is the terminal's to choose: left as it is.
    """
    if any(Color.parse(c).ansi is not None for c in (theme.primary, theme.foreground or "#000000")):
        return theme
    colours = theme.to_color_system().generate()
    grounds = (Color.parse(colours["background"]), Color.parse(colours["surface"]))
    variables = {**fallback, **theme.variables}
    for name, source in DERIVED.items():
        variables.setdefault(name, colours[source])
    variables.setdefault("prob-bar-removed", Color.parse(colours["foreground"]).blend(grounds[0], 0.55).hex)
    for name, ratio in NEEDED.items():
        colour = Color.parse(variables[name] if name in variables else colours[name])
        shade = readable(colour, grounds, ratio)
        if shade != colour or name not in variables:
            variables[name] = shade.hex
    return replace(theme, variables=variables)
