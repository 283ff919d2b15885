"""Hostile settings files: too deep, not colours, thousands of bad keys, keys that collide.

Each is one line (or a capped list of lines) and the defaults, never a crash at start-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.core.settings import TomlProblem, load_config, read_toml
from engine.core.settings.files import MAX_PROBLEMS
from tui.app.bindings import binding_defaults, binding_ids
from tui.app.keymap import build_keymap
from tui.app.themes import (
    ThemeError,
    load_builtin_themes,
    load_user_themes,
    theme_from_data,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- too deep

@pytest.mark.parametrize("value", ["[" * 800 + "]" * 800, "{a = " * 800 + "1" + "}" * 800])
def test_a_file_nested_800_deep_is_one_line(tmp_path: Path, value: str) -> None:
    path = write(tmp_path / "c.toml", f"[sampling]\ntemperature = 0.5\n[ui]\nx = {value}\n")
    loaded = load_config(path)
    assert len(loaded.problems) == 1 and "nested too deeply" in loaded.problems[0]
    assert loaded.problems[0].endswith("using the defaults instead of this file")
    assert loaded.config.sampling.temperature != 0.5  # the whole file was set aside


def test_a_table_800_deep_by_dotted_keys_is_one_line(tmp_path: Path) -> None:
    """tomllib reads a dotted header without recursing; what would recurse later is our code."""
    path = write(tmp_path / "c.toml", "[keys." + ".".join(["a"] * 800) + ']\nx = "f2"\n')
    result = read_toml(path)
    assert isinstance(result, TomlProblem) and "nested too deeply" in result.message
    loaded = load_config(path)
    assert len(loaded.problems) == 1 and loaded.config.keys == {}


def test_a_deep_theme_file_is_one_line(tmp_path: Path) -> None:
    write(tmp_path / "themes" / "deep.toml", 'name = "deep"\nprimary = "#123456"\nx = ' + "[" * 800 + "]" * 800)
    themes, problems = load_user_themes(tmp_path)
    assert themes == [] and len(problems) == 1 and "nested too deeply" in problems[0]


# --- themes

def test_a_theme_variable_that_is_not_a_colour_is_one_line(tmp_path: Path) -> None:
    write(tmp_path / "themes" / "bad.toml", 'name = "badvar"\nprimary = "#336699"\n[variables]\nborder = "banana"\n')
    themes, problems = load_user_themes(tmp_path)
    assert themes == []
    assert problems == [f"{tmp_path / 'themes' / 'bad.toml'}:4: variables.border: 'banana' is not a colour; "
                        "theme not loaded"]


@pytest.mark.parametrize("value", ["red; } Screen { color: red", "#12345", "bold", "$primary"])
def test_variable_values_that_would_break_the_stylesheet(value: str) -> None:
    with pytest.raises(ThemeError):
        theme_from_data({"name": "t", "primary": "#123456", "variables": {"footer-key-foreground": value}})


def test_every_textual_and_builtin_variable_value_is_accepted() -> None:
    """The check must not refuse what Textual itself generates ("auto 87%", "ansi_default", styles)."""
    from textual.theme import BUILTIN_THEMES

    for theme in [*BUILTIN_THEMES.values(), *load_builtin_themes()]:
        variables = theme.to_color_system().generate() | theme.variables
        theme_from_data({"name": "t", "primary": "#123456", "variables": variables})


async def test_the_app_starts_with_a_theme_whose_variable_is_not_a_colour(tmp_path: Path) -> None:
    from engine.scripted import ScriptedEngine
    from tui.app.application import LogitscopeApp

    write(tmp_path / "cfg" / "themes" / "bad.toml", 'name = "badvar"\nprimary = "#336699"\n[variables]\nborder = "x"\n')
    config = write(tmp_path / "c.toml", '[ui]\ntheme = "badvar"\n')
    app = LogitscopeApp(ScriptedEngine(), load_config(config), config_dir=tmp_path / "cfg", save_dir=tmp_path / "s")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.theme == "logitscope-dark"
        notes = [n.message for n in app._notifications]
        assert any("variables.border" in n for n in notes) and any("'badvar' not found" in n for n in notes)


@pytest.mark.parametrize("name", ["[/]", "[bold]x[/]", "a\x1b]0;T\x07", "x" * 65])
def test_a_theme_name_must_be_plain(name: str) -> None:
    with pytest.raises(ThemeError, match="name"):
        theme_from_data({"name": name, "primary": "#123456"})


# --- thousands of bad [keys]

def test_thousands_of_bad_keys_stop_after_twenty_with_a_count(tmp_path: Path) -> None:
    lines = "".join(f'"nope.{i}" = "ctrl+x"\n' for i in range(2000)) + "".join(f'"bad.{i}" = {i}\n' for i in range(2000))
    path = write(tmp_path / "c.toml", "[keys]\n" + lines)
    loaded = load_config(path)
    assert len(loaded.problems) == MAX_PROBLEMS + 1
    assert loaded.problems[0] == f"{path}:2002: [keys] bad.0: must be a key string like \"ctrl+up\", got 0; ignored"
    assert loaded.problems[-1] == f"{path}: 1980 more problems not listed"
    keymap, problems = build_keymap(loaded.config.keys, binding_ids(), path, defaults=binding_defaults())
    assert keymap == {} and len(problems) == MAX_PROBLEMS + 1
    assert problems[0].startswith(f"{path}:2: [keys] nope.0: unknown binding id")
    assert problems[19].startswith(f"{path}:21: [keys] nope.19: unknown binding id")
    assert problems[-1] == f"{path}: 1980 more problems not listed"


def test_locating_keys_scans_the_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Linear, not one scan per problem (4,000 bad lines took 46 s)."""
    from engine.core.settings import files

    scans = []
    original = files.KeyLines.__init__

    def counting(self: Any, text: str) -> None:
        scans.append(1)
        original(self, text)

    monkeypatch.setattr(files.KeyLines, "__init__", counting)
    path = write(tmp_path / "c.toml", "[keys]\n" + "".join(f'"bad.{i}" = {i}\n' for i in range(50))
                 + "[ui]\nnope = 1\nother = 2\n")
    assert len(load_config(path).problems) == MAX_PROBLEMS + 1
    assert len(scans) == 1  # this file, once (the packaged defaults have no problem to locate)


# --- key conflicts (#13.6)

def _keymap(tmp_path: Path, text: str) -> tuple[dict[str, str], list[str], Path]:
    path = write(tmp_path / "c.toml", "[keys]\n" + text)
    keys = load_config(path).config.keys
    keymap, problems = build_keymap(keys, binding_ids(), path, defaults=binding_defaults())
    return keymap, problems, path


def test_a_key_already_used_is_reported_with_both_ids_and_not_applied(tmp_path: Path) -> None:
    keymap, problems, path = _keymap(tmp_path, '"param.temperature.up" = "ctrl+q"\n')
    assert keymap == {}
    assert problems == [f"{path}:2: [keys] param.temperature.up: 'ctrl+q' is already the key of app.quit; ignored"]


def test_a_key_freed_by_another_entry_may_be_taken(tmp_path: Path) -> None:
    keymap, problems, _ = _keymap(tmp_path, '"param.temperature.up" = "ctrl+q"\n"app.quit" = "ctrl+x"\n')
    assert problems == [] and keymap == {"param.temperature.up": "ctrl+q", "app.quit": "ctrl+x"}


def test_two_entries_taking_one_key_keep_the_first(tmp_path: Path) -> None:
    keymap, problems, path = _keymap(tmp_path, 'param.top_k.up = "f11"\n"param.top_p.up" = "ctrl+y, f11"\n')
    assert keymap == {"param.top_k.up": "f11"}
    assert problems == [f"{path}:3: [keys] param.top_p.up: 'f11' is already the key of param.top_k.up; ignored"]


def test_keys_in_places_never_active_together_do_not_conflict(tmp_path: Path) -> None:
    """The input and the transcript never have focus at once; the screen's keys are always live."""
    keymap, problems, path = _keymap(tmp_path, '"chat.history.prev" = "h"\n"param.seed.up" = "n"\n')
    assert keymap == {"chat.history.prev": "h"}
    assert problems == [f"{path}:3: [keys] param.seed.up: 'n' is already the key of token.next_low; ignored"]


def test_an_invalid_key_name_names_file_line_and_id(tmp_path: Path) -> None:
    keymap, problems, path = _keymap(tmp_path, '"app.quit" = "ctrl+nokey"\n')
    assert keymap == {} and problems[0].startswith(f"{path}:2: [keys] app.quit: 'nokey' in 'ctrl+nokey'")


async def test_the_app_keeps_ctrl_q_for_quit(tmp_path: Path) -> None:
    from engine.scripted import ScriptedEngine
    from tui.app.application import LogitscopeApp

    config = write(tmp_path / "c.toml", '[keys]\n"param.temperature.up" = "ctrl+q"\n')
    app = LogitscopeApp(ScriptedEngine(), load_config(config), config_dir=tmp_path / "cfg", save_dir=tmp_path / "s")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert "param.temperature.up" not in app.keymap
        assert any("app.quit" in n.message and "param.temperature.up" in n.message for n in app._notifications)
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert app.return_code == 0 and app.controller.params.temperature == 0.7


def test_a_missing_theme_is_one_short_line() -> None:
    """It named all twenty-odd themes (a screenful of toast at 80x24) and echoed any name whole."""
    from tui.app.themes import resolve_theme_name

    name, problem = resolve_theme_name("x" * 100_000, [f"theme-{i}" for i in range(30)] + ["logitscope-dark"])
    assert name == "logitscope-dark" and problem is not None and len(problem) < 140
    assert problem.endswith("not found; using logitscope-dark (F8 lists the themes)")


def test_textuals_own_keys_are_taken_too(tmp_path: Path) -> None:
    keymap, problems, path = _keymap(tmp_path, '"param.seed.up" = "tab"\n"view.params" = "ctrl+c"\n')
    assert keymap == {}
    assert problems == [f"{path}:2: [keys] param.seed.up: 'tab' is already the key of textual.focus_next; ignored",
                        f"{path}:3: [keys] view.params: 'ctrl+c' is already the key of textual.copy; ignored"]


def test_a_key_spelt_another_way_is_the_same_key(tmp_path: Path) -> None:
    """Tab is ctrl+i to a terminal; "[" is left_square_bracket to Textual's keymap."""
    keymap, problems, path = _keymap(tmp_path, '"param.seed.up" = "ctrl+i"\n"param.seed.down" = "["\n')
    assert keymap == {}
    assert problems == [f"{path}:2: [keys] param.seed.up: 'ctrl+i' is already the key of textual.focus_next; ignored",
                        f"{path}:3: [keys] param.seed.down: '[' is already the key of branch.prev; ignored"]


async def test_start_up_shows_one_config_toast_and_f1_lists_them(tmp_path: Path) -> None:
    """Each file's lines are capped; many bad theme files (one line each) are counted too. One
    toast says the first and how many more; F1 lists every line."""
    from engine.scripted import ScriptedEngine
    from tui.app.application import LogitscopeApp

    for i in range(40):
        write(tmp_path / "cfg" / "themes" / f"t{i:02}.toml", "name = \n")
    config = write(tmp_path / "c.toml", "[ui]\nnope = 1\n")
    app = LogitscopeApp(ScriptedEngine(), load_config(config), config_dir=tmp_path / "cfg", save_dir=tmp_path / "s")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        notes = [n.message for n in app._notifications]
        await pilot.press("f1")
        await pilot.pause()
        listed = str(app.screen.query_one("#problems").render())
    assert len(notes) == 1 and notes[0].startswith(f"{config}:2: [ui] nope")
    assert notes[0].endswith("(and 40 more: F1 lists them)")
    assert listed.startswith("Config problems (41)") and listed.count("\n• ") == 41


def test_locating_stays_linear_for_key_like_lines_in_a_string(tmp_path: Path) -> None:
    """A multi-line string (depth 1, a valid file) can hold lines that look like 800-part dotted
    keys; the scan registers at most MAX_DEPTH + 1 parts of a path (no real key is deeper), not
    every prefix of every line (quadratic in the line's length)."""
    from engine.core.settings import KeyLines
    from engine.core.settings.files import MAX_DEPTH

    fake = "\n".join(".".join(["a"] * 800) + " = 1" for _ in range(50))
    text = f'[ui]\nnope = """\n{fake}\n"""\n'
    lines = KeyLines(text)
    assert len(lines._under) <= MAX_DEPTH + 3 and lines.line(("ui", "nope")) == 2
    path = write(tmp_path / "c.toml", text)
    assert load_config(path).problems[0].startswith(f"{path}:2: [ui] nope: unknown setting")
