"""Fixtures for the TUI tests: a scripted engine, a config in a temp folder, an app factory."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from engine.core.settings.config import LoadedConfig, load_config
from engine.scripted import ScriptedEngine
from tui.app.application import LogitscopeApp

AppFactory = Callable[..., LogitscopeApp]


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the real user's config or state."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return tmp_path / "config.toml"


@pytest.fixture
def make_app(tmp_path: Path, config_path: Path) -> AppFactory:
    """Build an app around a ScriptedEngine; pass `engine=` or `config_text=` to vary it."""

    def build(engine: ScriptedEngine | None = None, config_text: str | None = None) -> LogitscopeApp:
        if config_text is not None:
            config_path.write_text(config_text, encoding="utf-8")
        loaded: LoadedConfig = load_config(config_path)
        return LogitscopeApp(engine or ScriptedEngine(), loaded, config_dir=tmp_path / "cfg",
                             save_dir=tmp_path / "state")

    return build
