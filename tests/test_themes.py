"""Themes: the built-ins are complete and readable, user themes load, broken ones are one line."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.color import Color
from textual.theme import Theme
from textual.widgets import Static

from tui.app.themes import (
    REQUIRED_VARIABLES,
    heat_colour,
    load_builtin_themes,
    load_user_themes,
    register_all,
    resolve_theme_name,
    theme_from_data,
    theme_variable_defaults,
)

# What the app's CSS uses; a theme missing one would make Textual refuse the stylesheet.
APP_VARIABLES = {"heat-low", "heat-mid", "heat-high", "prob-bar", "prob-bar-sampled",
                 "prob-bar-removed", "chosen-token"}


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio, computed independently of Textual."""

    def luminance(colour: str) -> float:
        r, g, b = (int(colour.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4))
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    low, high = sorted((luminance(a), luminance(b)))
    return (high + 0.05) / (low + 0.05)


@pytest.fixture(scope="module")
def builtins() -> list[Theme]:
    return load_builtin_themes()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_required_variables_are_the_ones_the_app_uses() -> None:
    assert set(REQUIRED_VARIABLES) == APP_VARIABLES


def test_builtin_themes_are_complete(builtins: list[Theme]) -> None:
    names = [theme.name for theme in builtins]
    files = sorted(e.name for e in resources.files("themes").iterdir() if e.name.endswith(".toml"))
    assert len(builtins) >= 4 and len(set(names)) == len(names)
    assert sorted(f"{name}.toml" for name in names) == files  # file name = theme name
    assert {"logitscope-dark", "logitscope-light"} <= set(names)
    assert any(not theme.dark for theme in builtins)
    for theme in builtins:
        assert APP_VARIABLES <= set(theme.variables), theme.name
        for key in ("primary", "secondary", "accent", "foreground", "background", "surface", "panel",
                    "success", "warning", "error"):
            Color.parse(getattr(theme, key))


def test_builtin_themes_are_readable(builtins: list[Theme]) -> None:
    """Heatmap backgrounds keep the text readable (WCAG AA); bars stand out from the panels."""
    for theme in builtins:
        v = theme.variables
        assert theme.foreground and theme.background and theme.surface
        for key in ("heat-low", "heat-mid", "heat-high"):
            assert contrast(theme.foreground, v[key]) >= 4.5, (theme.name, key)
        for key in ("prob-bar", "prob-bar-sampled", "chosen-token"):
            for base in (theme.background, theme.surface):
                assert contrast(base, v[key]) >= 3.0, (theme.name, key)
        assert contrast(theme.surface, v["prob-bar-removed"]) >= 1.5, theme.name
        assert len({v["heat-low"], v["heat-mid"], v["heat-high"]}) == 3, theme.name


class Probe(App[None]):
    """Uses every app variable in CSS, as the real app does."""

    CSS = "\n".join(f"#v-{name} {{ background: ${name}; }}" for name in sorted(APP_VARIABLES))

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return theme_variable_defaults()

    def compose(self) -> ComposeResult:
        for name in sorted(APP_VARIABLES):
            yield Static(name, id=f"v-{name}")


async def test_every_theme_applies_in_a_real_app(tmp_path: Path, builtins: list[Theme]) -> None:
    app = Probe()
    async with app.run_test() as pilot:
        assert register_all(app, tmp_path) == []
        for theme in builtins:
            app.theme = theme.name
            await pilot.pause()
            for name in APP_VARIABLES:
                shown = app.query_one(f"#v-{name}", Static).styles.background
                assert shown == Color.parse(theme.variables[name]), (theme.name, name)


async def test_textual_themes_fall_back_to_our_variables(builtins: list[Theme]) -> None:
    """A Textual built-in theme (no logitscope variables) still colours the heatmap."""
    dark = next(t for t in builtins if t.name == "logitscope-dark")
    assert theme_variable_defaults() == {k: dark.variables[k] for k in APP_VARIABLES}
    app = Probe()
    async with app.run_test() as pilot:
        app.theme = "textual-light"
        await pilot.pause()
        shown = app.query_one("#v-heat-low", Static).styles.background
        assert shown == Color.parse(dark.variables["heat-low"])


def test_user_theme_loads_and_borrows_missing_variables(tmp_path: Path, builtins: list[Theme]) -> None:
    write(tmp_path / "themes" / "paper.toml", """name = "paper"
dark = false
primary = "#336699"
background = "#ffffee"
[variables]
"heat-low" = "#ffdddd"
"my-extra" = "1"
""")
    themes, problems = load_user_themes(tmp_path, builtins)
    assert problems == []
    (paper,) = themes
    light = next(t for t in builtins if t.name == "logitscope-light")
    assert paper.name == "paper" and paper.dark is False and paper.primary == "#336699"
    assert paper.variables["heat-low"] == "#ffdddd"
    assert paper.variables["heat-high"] == light.variables["heat-high"]
    assert paper.variables["my-extra"] == "1"
    assert APP_VARIABLES <= set(paper.variables)


def test_no_theme_folder_is_fine(tmp_path: Path) -> None:
    assert load_user_themes(tmp_path) == ([], [])


def test_broken_user_themes_are_one_line_each(tmp_path: Path) -> None:
    folder = tmp_path / "themes"
    write(folder / "a-syntax.toml", 'name = "a"\nprimary = \n')
    write(folder / "b-colour.toml", 'name = "b"\nprimary = "#123456"\n[variables]\n"heat-mid" = "hot"\n')
    write(folder / "c-typo.toml", 'name = "c"\nprimary = "#123456"\nprimay = "#000000"\n')
    write(folder / "d-noname.toml", 'primary = "#123456"\n')
    write(folder / "e-dark.toml", 'name = "e"\nprimary = "#123456"\ndark = "no"\n')
    write(folder / "f-good.toml", 'name = "f"\nprimary = "#123456"\n')
    themes, problems = load_user_themes(tmp_path)
    assert [t.name for t in themes] == ["f"]
    assert len(problems) == 5
    assert problems[0].startswith(f"{folder}/a-syntax.toml:2:") and "TOML syntax error" in problems[0]
    assert problems[1].startswith(f"{folder}/b-colour.toml:4: variables.heat-mid: 'hot' is not a colour")
    assert problems[2].startswith(f"{folder}/c-typo.toml:3: unknown key 'primay'")
    assert problems[3].startswith(f"{folder}/d-noname.toml: needs a name")
    assert problems[4].startswith(f"{folder}/e-dark.toml:3: dark must be true or false")
    assert all(p.endswith("theme not loaded") and "\n" not in p for p in problems)


def test_register_all_lets_a_user_theme_replace_a_builtin(tmp_path: Path) -> None:
    write(tmp_path / "themes" / "mine.toml", 'name = "logitscope-dark"\nprimary = "#ff0000"\n')
    write(tmp_path / "themes" / "bad.toml", "name = ")
    app = App[None]()
    problems = register_all(app, tmp_path)
    assert len(problems) == 1 and "bad.toml" in problems[0]
    replaced = app.get_theme("logitscope-dark")
    assert replaced is not None and replaced.primary == "#ff0000"
    assert {"logitscope-light", "logitscope-nord"} <= set(app.available_themes)


def test_theme_from_data_checks_numbers() -> None:
    theme = theme_from_data({"name": "n", "primary": "red", "text_alpha": 1})
    assert theme.text_alpha == 1.0 and theme.variables == {}
    with pytest.raises(ValueError, match="luminosity_spread"):
        theme_from_data({"name": "n", "primary": "red", "luminosity_spread": 2})


def test_resolve_theme_name() -> None:
    assert resolve_theme_name("a", ["a", "b"]) == ("a", None)
    name, problem = resolve_theme_name("zz", ["logitscope-dark", "logitscope-light"], dark=False)
    assert name == "logitscope-light" and problem is not None and "'zz' not found" in problem


def test_heat_colour_runs_from_low_to_high(builtins: list[Theme]) -> None:
    v = builtins[0].variables
    assert heat_colour(0.0, v) == Color.parse(v["heat-low"]).hex6
    assert heat_colour(0.5, v) == Color.parse(v["heat-mid"]).hex6
    assert heat_colour(1.0, v) == Color.parse(v["heat-high"]).hex6
    assert heat_colour(-3, v) == heat_colour(0.0, v) and heat_colour(7, v) == heat_colour(1.0, v)
    assert heat_colour(float("nan"), v) == heat_colour(0.0, v)
    quarter = Color.parse(heat_colour(0.25, v))
    expected = Color.parse(v["heat-low"]).blend(Color.parse(v["heat-mid"]), 0.5)
    assert abs(quarter.r - expected.r) <= 1 and abs(quarter.g - expected.g) <= 1
