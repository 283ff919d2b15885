"""Themes are data: TOML files turned into `textual.theme.Theme` objects.

The built-in themes live in the `themes` package (``themes/*.toml``, shipped as package data so a
wheel has them too); a user adds their own by dropping a ``.toml`` file into
``$XDG_CONFIG_HOME/logitscope/themes/``. A theme file holds Textual's colours plus a
``[variables]`` table of logitscope's own colours (`REQUIRED_VARIABLES`), which the app's CSS
uses as ``$heat-low``, ``$prob-bar`` and so on.

A broken user theme is one line in the problem list, never a crash; a user theme that leaves out
some of logitscope's variables borrows them from the built-in dark or light theme.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from textual.app import App
from textual.color import Color, ColorParseError
from textual.css._styles_builder import StylesBuilder
from textual.css.stylesheet import Stylesheet, StylesheetParseError
from textual.theme import Theme

from engine.core.settings import (
    TomlProblem,
    display_path,
    format_location,
    parse_toml,
    read_toml,
)
from tui.app.contrast import readable_theme

# Every app-specific variable a theme must define, with what it colours.
REQUIRED_VARIABLES: dict[str, str] = {
    "heat-low": "heatmap background behind unlikely tokens",
    "heat-mid": "heatmap background behind middling tokens",
    "heat-high": "heatmap background behind tokens the model was sure about",
    "prob-bar": "candidate bar: raw model probability",
    "prob-bar-sampled": "candidate bar: probability in the distribution sampled from",
    "prob-bar-removed": "candidate bar: a candidate a filter removed",
    "chosen-token": "the token that was picked, in the candidates list",
}
DEFAULT_DARK = "logitscope-dark"
DEFAULT_LIGHT = "logitscope-light"

_COLOUR_KEYS = (
    "primary", "secondary", "accent", "foreground", "background", "surface", "panel",
    "success", "warning", "error", "boost",
)
_NUMBER_KEYS = ("luminosity_spread", "text_alpha")
_KNOWN_KEYS = {"name", "dark", "variables", *_COLOUR_KEYS, *_NUMBER_KEYS}
# A theme's name is an identifier (config.toml's [ui] theme names it) that Textual's own theme
# picker reads as markup: letters, digits, spaces and - _ . + only, so "[/]" cannot crash it.
_NAME = re.compile(r"[\w .+-]{1,64}")


class ThemeError(ValueError):
    """A theme file that cannot become a theme; the message is one line (without the file)."""

    def __init__(self, message: str, key: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.key = key  # where in the file, for the line number


def _colour(value: object, key: tuple[str, ...]) -> str:
    """A colour Textual can parse, or a ThemeError naming the key."""
    if not isinstance(value, str):
        raise ThemeError(f"{'.'.join(key)} must be a colour string like \"#336699\", got {value!r}", key)
    try:
        Color.parse(value)
    except ColorParseError:
        raise ThemeError(f"{'.'.join(key)}: {value!r} is not a colour", key) from None
    return value


def _css_property(name: str) -> str:
    """The CSS property a theme variable is written into: a style (``block-cursor-text-style``,
    or ``link-style-hover``, a property of its own), else a colour (every other variable Textual
    generates, ``border`` and ``footer-key-foreground`` included, and all of logitscope's)."""
    if "-style" not in name:
        return "color"
    return name if hasattr(StylesBuilder, f"process_{name.replace('-', '_')}") else "text-style"


@cache
def _styled_variables() -> frozenset[str]:
    """The variables some stylesheet uses: every one Textual generates, and logitscope's."""
    generated = Theme(name="probe", primary="#000000").to_color_system().generate()
    return frozenset(generated) | frozenset(REQUIRED_VARIABLES)


def _check_variable(name: str, value: str) -> None:
    """Raise ThemeError unless `value` parses where Textual's CSS will put it.

    Textual substitutes a variable into every rule that names it and refuses the whole
    stylesheet (the app dies at start) if one value does not parse there, so each value of a
    variable a stylesheet uses is parsed the same way first, alone. Only one plain value is
    allowed: no ``;{}`` smuggling other rules in, no ``$`` reference to a variable that may not
    exist. A variable no stylesheet names (the user's own) is never substituted: kept as is.
    """
    if name not in _styled_variables():
        return
    key = ("variables", name)
    if any(ch in value for ch in ";{}$\n") or not value.strip():
        raise ThemeError(f"variables.{name}: {value[:40]!r} is not a plain value", key)
    sheet = Stylesheet()
    sheet.add_source(f"Screen {{ {_css_property(name)}: {value}; }}", read_from=("theme", name))
    try:
        sheet.parse()
    except StylesheetParseError:
        kind = "colour" if _css_property(name) == "color" else "text style"
        raise ThemeError(f"variables.{name}: {value[:40]!r} is not a {kind}", key) from None


def _variables(raw: object, fallback: Mapping[str, str]) -> dict[str, str]:
    """The [variables] table, checked; missing app variables come from `fallback`."""
    if not isinstance(raw, dict):
        raise ThemeError(f"variables must be a table, got {raw!r}", ("variables",))
    variables = dict(fallback)
    for name, value in raw.items():
        if not isinstance(value, str):
            raise ThemeError(f"variables.{name} must be a string, got {value!r}", ("variables", name))
        if name in REQUIRED_VARIABLES:
            _colour(value, ("variables", name))  # blended by the heatmap: a plain colour
        _check_variable(name, value)
        variables[name] = value
    return variables


def theme_from_data(data: Mapping[str, Any], fallback_variables: Mapping[str, str] | None = None) -> Theme:
    """Build a Theme from parsed TOML. Raises ThemeError for anything Textual would choke on.

    Unknown top-level keys are refused too: a misspelt ``primay`` would otherwise be silently
    ignored and the user would wonder why their colour never shows.
    """
    unknown = sorted(set(data) - _KNOWN_KEYS)
    if unknown:
        raise ThemeError(f"unknown key {unknown[0]!r}", (unknown[0],))
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ThemeError("needs a name = \"...\"", ("name",))
    if not _NAME.fullmatch(name.strip()):
        raise ThemeError(f"name {name[:64]!r}: use letters, digits, spaces, - _ . + (at most 64)", ("name",))
    if "primary" not in data:
        raise ThemeError("needs a primary colour", ("primary",))
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ThemeError(f"dark must be true or false, got {dark!r}", ("dark",))
    colours = {key: _colour(data[key], (key,)) for key in _COLOUR_KEYS if key in data}
    numbers: dict[str, float] = {}
    for key in _NUMBER_KEYS:
        if key in data:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ThemeError(f"{key} must be a number from 0 to 1, got {value!r}", (key,))
            numbers[key] = float(value)
    variables = _variables(data.get("variables", {}), fallback_variables or {})
    return Theme(name=name.strip(), dark=dark, variables=variables, **colours, **numbers)  # type: ignore[arg-type]


def load_builtin_themes() -> list[Theme]:
    """The themes shipped in the `themes` package, sorted by name.

    Read through importlib.resources so they are found in a checkout, an editable install and a
    wheel alike. A broken built-in is our bug, so it raises (the tests load every one).
    """
    themes = []
    for entry in sorted(resources.files("themes").iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".toml"):
            continue
        data = parse_toml(entry.read_text(encoding="utf-8"), f"themes/{entry.name}")
        if isinstance(data, TomlProblem):
            raise ThemeError(data.message)
        try:
            themes.append(theme_from_data(data))
        except ThemeError as exc:
            raise ThemeError(f"themes/{entry.name}: {exc}") from exc
    return themes


def _fallback_for(data: Mapping[str, Any], builtins: Sequence[Theme]) -> Mapping[str, str]:
    """Variables a user theme may leave out: those of our dark or light theme, by its `dark`."""
    wanted = DEFAULT_LIGHT if data.get("dark", True) is False else DEFAULT_DARK
    for theme in builtins:
        if theme.name == wanted:
            return {k: v for k, v in theme.variables.items() if k in REQUIRED_VARIABLES}
    return {}


def load_user_themes(config_dir: Path, builtins: Sequence[Theme] | None = None) -> tuple[list[Theme], list[str]]:
    """Themes from ``config_dir/themes/*.toml`` and one line per file that could not be used.

    A missing folder is normal (no themes, no problems).
    """
    folder = config_dir / "themes"
    if not folder.is_dir():
        return [], []
    builtins = load_builtin_themes() if builtins is None else builtins
    themes: list[Theme] = []
    problems: list[str] = []
    for path in sorted(folder.glob("*.toml")):
        result = read_toml(path)
        if isinstance(result, TomlProblem):
            problems.append(f"{result.message}; theme not loaded")
            continue
        data, text = result
        try:
            themes.append(theme_from_data(data, _fallback_for(data, builtins)))
        except ThemeError as exc:
            where = format_location(path, text, exc.key[:-1], exc.key[-1]) if exc.key else display_path(path)
            problems.append(f"{where}: {exc}; theme not loaded")
    return themes, problems


def register_all(app: App[Any], config_dir: Path) -> list[str]:
    """Register the built-in themes, then the user's (a user theme may replace a built-in of the
    same name). Returns the problems with the user's theme files, one line each.

    Then every theme the app offers, Textual's own included, is registered again made readable
    (`tui.app.contrast.readable_theme`): heat and bar colours where it has none (Textual's light
    themes had our dark heatmap), borders and bars at 3:1 on its background in truecolor and 256
    colours (Textual's unfocused border was ~1.05:1, black on near-black in tmux)."""
    builtins = load_builtin_themes()
    user_themes, problems = load_user_themes(config_dir, builtins)
    for theme in [*builtins, *user_themes]:
        app.register_theme(theme)
    for theme in list(app.available_themes.values()):
        app.register_theme(readable_theme(theme, _fallback_for({"dark": theme.dark}, builtins)))
    return problems


def theme_variable_defaults() -> dict[str, str]:
    """Fallbacks for logitscope's variables, for ``App.get_theme_variable_defaults``.

    Textual refuses a stylesheet that uses ``$heat-low`` unless the variable has a value before
    the first theme applies, and Textual's own themes (textual-dark, nord, ...) never define it.
    So the App returns these (our dark theme's values) and every theme keeps the heatmap working.
    """
    for theme in load_builtin_themes():
        if theme.name == DEFAULT_DARK:
            return {k: v for k, v in theme.variables.items() if k in REQUIRED_VARIABLES}
    raise ThemeError(f"the built-in theme {DEFAULT_DARK} is missing")


def resolve_theme_name(name: str, available: Iterable[str], dark: bool = True) -> tuple[str, str | None]:
    """The configured theme if it exists, else our default and a one-line problem saying so.

    The line names where the list is rather than listing twenty-odd themes: on an 80x24
    terminal the list filled the screen. A long name is cut: it is an echo, not the point.
    """
    names = set(available)
    if name in names:
        return name, None
    fallback = DEFAULT_DARK if dark else DEFAULT_LIGHT
    shown = name if len(name) <= 60 else name[:57] + "..."
    return fallback, f"theme {shown!r} not found; using {fallback} (F8 lists the themes)"


def heat_colour(prob: float, variables: Mapping[str, str]) -> str:
    """The heatmap colour for a token of probability `prob`, as ``#rrggbb``.

    Blends heat-low -> heat-mid over [0, 0.5] and heat-mid -> heat-high over [0.5, 1], so colour
    changes smoothly with probability instead of jumping at arbitrary thresholds.
    """
    p = min(1.0, max(0.0, prob)) if prob == prob else 0.0  # NaN counts as "unlikely"
    low, mid, high = (Color.parse(variables[k]) for k in ("heat-low", "heat-mid", "heat-high"))
    colour = low.blend(mid, p / 0.5) if p <= 0.5 else mid.blend(high, (p - 0.5) / 0.5)
    return colour.hex6
