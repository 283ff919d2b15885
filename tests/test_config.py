"""Settings: packaged defaults, user overrides, one-line problems, atomic saving; the [keys] check."""

from __future__ import annotations

import os
import stat
import tomllib
from dataclasses import fields
from pathlib import Path

import pytest
from textual.app import App
from textual.binding import Binding

from engine.core.api import SamplingParams
from engine.core.settings.config import (
    Config,
    ConfigError,
    ModelConfig,
    UIConfig,
    default_config_path,
    load_config,
    save_settings,
    user_config_dir,
    user_config_path,
)
from tui.app.keymap import build_keymap, key_problem

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of our own, away from tmp_path, so paths in messages are predictable everywhere."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    return home


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- defaults and paths -----------------------------------------------------------------------


def test_packaged_defaults_match_the_dataclasses(tmp_path: Path) -> None:
    """config.toml documents the defaults; the dataclasses must say the same, or one has drifted."""
    loaded = load_config(tmp_path / "absent.toml")
    assert loaded.problems == ()
    assert loaded.default_path == REPO / "config.toml"
    cfg = loaded.config
    assert cfg.model == ModelConfig() and cfg.ui == UIConfig() and cfg.sampling == SamplingParams()
    assert cfg.keys == {}
    assert set(cfg.presets) == {"precise", "balanced", "creative"}
    assert cfg.presets["balanced"]["top_p"] == 0.95
    for preset in cfg.presets.values():  # every preset applies cleanly
        SamplingParams().with_changes(**preset)


def test_packaged_file_sets_every_field() -> None:
    """Every setting is documented in config.toml, so every dataclass field appears there."""
    data = tomllib.loads((REPO / "config.toml").read_text())
    for section, cls in (("model", ModelConfig), ("ui", UIConfig), ("sampling", SamplingParams)):
        assert set(data[section]) == {f.name for f in fields(cls)}, section


def test_default_path_found_in_checkout() -> None:
    assert default_config_path() == REPO / "config.toml"


def test_user_paths_follow_xdg(tmp_path: Path) -> None:
    assert user_config_dir({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "logitscope"
    assert user_config_dir({"XDG_CONFIG_HOME": "relative/dir"}) == Path.home() / ".config/logitscope"
    assert user_config_dir({}) == Path.home() / ".config/logitscope"
    assert user_config_path(env={"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "logitscope/config.toml"
    assert user_config_path("~/x.toml") == Path.home() / "x.toml"


def test_messages_shorten_the_home_folder(home: Path) -> None:
    path = write(home / ".config/logitscope/config.toml", "[ui]\nheatmap = 1\n")
    assert load_config(path).problems[0].startswith("~/.config/logitscope/config.toml:2: [ui] heatmap")


def test_missing_user_file_is_normal_unless_named(tmp_path: Path) -> None:
    assert load_config(tmp_path / "none.toml").problems == ()
    problems = load_config(tmp_path / "none.toml", explicit=True).problems
    assert len(problems) == 1 and "none.toml: no such file" in problems[0]


# --- overrides ---------------------------------------------------------------------------------


def test_user_file_deep_merges(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", """
[model]
default = "mlx-community/Qwen3-0.6B-4bit"
[sampling]
temperature = 1
seed = 7
[presets.balanced]
top_p = 0.9
[presets.mine]
top_k = 40
seed = -1
[ui]
theme = "logitscope-nord"
[keys]
"param.temperature.up" = "ctrl+up"
app.quit = "ctrl+q"
""")
    loaded = load_config(path)
    cfg = loaded.config
    assert loaded.problems == ()
    assert loaded.user_path == path
    assert cfg.model == ModelConfig(default="mlx-community/Qwen3-0.6B-4bit")
    assert cfg.sampling == SamplingParams(temperature=1.0, seed=7)
    assert isinstance(cfg.sampling.temperature, float)
    assert cfg.presets["balanced"] == {"temperature": 0.7, "top_p": 0.9, "top_k": 0, "min_p": 0.05,
                                       "repetition_penalty": 1.05}
    assert cfg.presets["mine"] == {"top_k": 40, "seed": None}
    assert cfg.presets["precise"]["temperature"] == 0.0
    assert cfg.ui == UIConfig(theme="logitscope-nord")
    assert cfg.keys == {"param.temperature.up": "ctrl+up", "app.quit": "ctrl+q"}


def test_seed_minus_one_means_fresh(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", "[sampling]\nseed = -1\n")
    assert load_config(path).config.sampling.seed is None


def test_broken_toml_names_file_and_line_and_uses_defaults(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", "[sampling]\ntemperature = 1.0\ntop_k = = 3\n")
    loaded = load_config(path)
    assert loaded.config == load_config(tmp_path / "absent.toml").config
    (problem,) = loaded.problems
    assert f"{path}:3:" in problem and "TOML syntax error" in problem
    assert "\n" not in problem


def test_unterminated_file_points_at_its_end(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", '[ui]\ntheme = "abc\n')
    (problem,) = load_config(path).problems
    assert f"{path}:2:" in problem


def test_bad_values_are_located_and_the_rest_kept(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", """[model]
compute_dtype = "int8"
max_context = 4096

[sampling]
temperature = 9
top_k = 40
min_p = "high"

[presets.creative]
top_p = 2.0
min_p = 0.1

[ui]
heatmap = "yes"
show_params = false
""")
    loaded = load_config(path)
    cfg = loaded.config
    assert cfg.model.compute_dtype == "auto" and cfg.model.max_context == 4096
    assert cfg.sampling == SamplingParams(top_k=40)
    assert cfg.presets["creative"]["top_p"] == 1.0 and cfg.presets["creative"]["min_p"] == 0.1
    assert cfg.ui == UIConfig(show_params=False)
    expected = {
        2: "[model] compute_dtype: must be one of",
        6: "[sampling] temperature: must be between 0.0 and 5.0, got 9",
        8: "[sampling] min_p: must be a number",
        11: "[presets.creative] top_p: must be between",
        15: "[ui] heatmap: must be true or false",
    }
    assert len(loaded.problems) == len(expected)
    for problem, (line, text) in zip(loaded.problems, expected.items()):
        assert problem.startswith(f"{path}:{line}: {text}"), problem
        assert problem.endswith("ignored") and "\n" not in problem


def test_unknown_sections_and_keys_are_reported(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", """[sampling]
temprature = 1.0
[ui]
colour = "red"
[display]
x = 1
[presets]
broken = 3
[keys]
nested.id = 5
""")
    problems = load_config(path).problems
    assert [p.split(": ", 2)[:2] for p in problems] == [
        [f"{path}:2", "[sampling] temprature"],
        [f"{path}:4", "[ui] colour"],
        [f"{path}:5", "[display]"],
        [f"{path}:8", "[presets] broken"],
        [f"{path}:10", "[keys] nested.id"],
    ]


WEIRD_VALUES = ["true", "-1", "9" * 40, "-1e400", "nan", "inf", '"text"', '""', "[1, 2]", "{ a = 1 }",
                "1979-05-27T07:32:00Z"]


@pytest.mark.parametrize("value", WEIRD_VALUES)
def test_any_value_anywhere_never_raises(tmp_path: Path, value: str) -> None:
    """Every known key given every kind of TOML value: at most one problem per key, no exception."""
    defaults = load_config(tmp_path / "absent.toml").config
    sections = {"model": ModelConfig, "ui": UIConfig, "sampling": SamplingParams}
    lines = []
    for section, cls in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{f.name} = {value}" for f in fields(cls)]
    lines += ["[presets.p]", f"top_k = {value}", "[keys]", f'"a.b" = {value}', "[model.__class__]"]
    loaded = load_config(write(tmp_path / "c.toml", "\n".join(lines) + "\n"))
    assert all("\n" not in p and len(p) < 300 for p in loaded.problems)
    assert len(loaded.problems) <= sum(len(fields(c)) for c in sections.values()) + 3
    assert isinstance(loaded.config.sampling, SamplingParams)
    if value == "-1":  # the one value some keys accept: seed -1 = fresh, max_context -1 refused
        assert loaded.config.sampling.seed is None
    if value == "9" * 40:
        assert loaded.config.sampling == defaults.sampling


def test_section_that_is_not_a_table(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", 'sampling = 3\n[ui]\ntheme = "x"\n')
    loaded = load_config(path)
    assert loaded.config.ui.theme == "x"
    assert loaded.problems == (f"{path}:1: [sampling]: must be a table, got 3; ignored",)


def test_unreadable_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(b"[ui]\ntheme = \"\xff\"\n")
    (problem,) = load_config(path).problems
    assert "not UTF-8" in problem
    (problem,) = load_config(tmp_path, explicit=True).problems  # a folder, not a file
    assert "cannot read" in problem


# --- saving ------------------------------------------------------------------------------------


def test_save_round_trip_keeps_other_settings(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", """# my settings
[model]
default = "my-model"
[sampling]
temperature = 0.2
top_k = 5
[presets.mine]
top_k = 3
[ui]
heatmap = true
[keys]
"app.quit" = "ctrl+q"
""")
    params = SamplingParams(temperature=1.3, top_p=0.8, seed=None, candidates=20)
    save_settings(params, "logitscope-nord", path)
    loaded = load_config(path)
    assert loaded.problems == ()
    assert loaded.config.sampling == params
    assert loaded.config.ui == UIConfig(theme="logitscope-nord", heatmap=True)
    assert loaded.config.model.default == "my-model"
    assert loaded.config.presets["mine"] == {"top_k": 3}
    assert loaded.config.keys == {"app.quit": "ctrl+q"}
    assert tomllib.loads(path.read_text())["sampling"]["seed"] == -1


def test_save_creates_the_folder(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "config.toml"
    save_settings(SamplingParams(seed=3), "logitscope-light", path)
    assert load_config(path).config.sampling.seed == 3
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_save_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "c.toml", "[ui]\ntheme = \"logitscope-light\"\n")
    before = path.read_bytes()

    def fail(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(ConfigError, match="could not save .*No space left on device"):
        save_settings(SamplingParams(), "logitscope-dark", path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["c.toml"]  # no temporary file left behind


def test_save_refuses_to_overwrite_a_broken_file(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", "[model]\ndefault = \n")
    before = path.read_bytes()
    with pytest.raises(ConfigError) as info:
        save_settings(SamplingParams(), "logitscope-dark", path)
    assert f"{path}:2:" in str(info.value) and "not saving" in str(info.value)
    assert path.read_bytes() == before


def test_save_keeps_mode_and_writes_through_symlink(tmp_path: Path) -> None:
    real = write(tmp_path / "dotfiles" / "config.toml", "[model]\ndefault = \"m\"\n")
    real.chmod(0o600)
    link = tmp_path / "config.toml"
    link.symlink_to(real)
    save_settings(SamplingParams(top_k=9), "logitscope-dark", link)
    assert link.is_symlink()
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert load_config(real).config.sampling.top_k == 9
    assert load_config(real).config.model.default == "m"


def test_saved_config_equals_loaded_config_type(tmp_path: Path) -> None:
    """What Save writes loads back into exactly the same Config (nothing lost or retyped)."""
    path = tmp_path / "c.toml"
    params = SamplingParams(temperature=0.0, top_k=50, repetition_penalty=1.2, max_tokens=64)
    save_settings(params, "logitscope-dark", path)
    assert load_config(path).config == Config(
        sampling=params, presets=load_config(tmp_path / "x").config.presets
    )


# --- [keys] ------------------------------------------------------------------------------------


@pytest.mark.parametrize("keys", ["ctrl+up", "f2", "ctrl+shift+t, alt+t", "question_mark", "plus",
                                  "slash", "?", "A", "enter", "shift+tab", "ctrl+space", "pagedown"])
def test_valid_key_strings(keys: str) -> None:
    assert key_problem(keys) is None


@pytest.mark.parametrize("keys,fragment", [
    ("", "no key"), ("ctrl++", "'plus'"), ("Ctrl+a", "not a modifier"), ("ctrl+ctrl+a", "repeated"),
    ("ctrl+foo", "not a key"), ("a,,b", "empty key"),
])
def test_malformed_key_strings(keys: str, fragment: str) -> None:
    problem = key_problem(keys)
    assert problem is not None and fragment in problem


def test_build_keymap_keeps_good_entries_and_locates_bad_ones(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", """[keys]
"param.temperature.up" = "ctrl+up , f3"
"param.nothing" = "f4"
app.quit = "ctrl+bogus"
""")
    keys = load_config(path).config.keys
    keymap, problems = build_keymap(keys, {"param.temperature.up", "app.quit"}, path)
    assert keymap == {"param.temperature.up": "ctrl+up,f3"}
    assert problems[0].startswith(f"{path}:3: [keys] param.nothing: unknown binding id")
    assert problems[1].startswith(f"{path}:4: [keys] app.quit: 'bogus' in 'ctrl+bogus'")
    assert build_keymap({"x": "f1"}, set())[1][0].startswith("config: [keys] x")


async def test_keymap_rebinds_a_real_binding() -> None:
    """The dict we return is what Textual's set_keymap wants: the new key fires the action."""

    class Tiny(App[None]):
        BINDINGS = [Binding("a", "bump", "Bump", id="test.bump")]
        count = 0

        def action_bump(self) -> None:
            self.count += 1

    app = Tiny()
    keymap, problems = build_keymap({"test.bump": "ctrl+b"}, {"test.bump"})
    assert problems == []
    async with app.run_test() as pilot:
        app.set_keymap(keymap)
        await pilot.press("a")
        await pilot.press("ctrl+b")
        await pilot.pause()
    assert app.count == 1


def test_a_renamed_setting_names_its_new_name(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", "[model]\nfast_prefill = false\n")
    loaded = load_config(path)
    assert list(loaded.problems) == [f"{path}:2: [model] fast_prefill: renamed: call it fast_layers "
                               "(this value was not used); ignored"]
    assert loaded.config.model.fast_layers is True
