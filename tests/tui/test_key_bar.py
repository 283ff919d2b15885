"""The footer's key hints (`KeyBar`): what they show, that a change costs no layout, and that
they work as keys (click, hover tooltip, disabled keys, the keymap's names)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from textual.screen import Screen

from engine.scripted import ScriptedEngine
from tui.app.screens.chat import ChatScreen
from tui.app.screens.help import HelpScreen
from tui.app.widgets.key_bar import KeyBar


def _descriptions(bar: KeyBar) -> list[str]:
    return [hint.description for hint in bar.hints]


def _offset_of(bar: KeyBar, description: str) -> tuple[int, int]:
    """Where the bar draws `description` (a cell inside its hint)."""
    text = bar.render().plain
    return text.index(f" {description} ") + 1, 0


async def test_the_hints_follow_a_reply_starting_and_ending(make_app: Any) -> None:
    app = make_app(ScriptedEngine([["a", "b", "c", "d"]], token_delay=0.1))
    async with app.run_test() as pilot:
        bar = app.screen.query_one(KeyBar)
        await pilot.pause()
        assert "Stop" not in _descriptions(bar) and {"Quit", "Help", "Regenerate"} <= set(_descriptions(bar))
        await pilot.press("h", "i", "enter")
        await pilot.pause(0.05)
        assert app.controller.busy and "Stop" in _descriptions(bar)
        assert " Stop " in bar.render().plain
        while app.controller.busy:
            await pilot.pause(0.05)
        await pilot.pause()
        assert "Stop" not in _descriptions(bar)
        assert bar.palette is not None and bar.render().plain.rstrip().endswith("Commands")


async def test_a_change_of_bindings_repaints_the_bar_without_a_layout_pass(
    make_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    layouts: list[Screen[Any]] = []
    original = Screen._refresh_layout

    def counting(self: Screen[Any], *args: Any, **kwargs: Any) -> None:
        layouts.append(self)
        original(self, *args, **kwargs)

    app = make_app()
    async with app.run_test() as pilot:
        await pilot.pause()
        bar = app.screen.query_one(KeyBar)
        monkeypatch.setattr(Screen, "_refresh_layout", counting)
        monkeypatch.setattr(ChatScreen, "check_action", lambda self, action, parameters: True)  # Stop shows
        app.screen.refresh_bindings()
        await pilot.pause()
        await pilot.pause()
        assert "Stop" in _descriptions(bar)
        assert layouts == []


async def test_a_click_on_a_hint_presses_its_key(make_app: Any) -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await pilot.pause()
        await pilot.click(KeyBar, offset=_offset_of(app.screen.query_one(KeyBar), "Help"))
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)


async def test_a_disabled_hint_is_dimmed_and_a_click_on_it_only_rings_the_bell(
    make_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app()
    rings: list[bool] = []
    ran: list[bool] = []
    async with app.run_test() as pilot:
        monkeypatch.setattr(app, "bell", lambda: rings.append(True))
        monkeypatch.setattr(ChatScreen, "action_regenerate", lambda self: ran.append(True))
        monkeypatch.setattr(ChatScreen, "check_action",
                            lambda self, action, parameters: None if action == "regenerate" else True)
        app.screen.refresh_bindings()
        await pilot.pause()
        bar = app.screen.query_one(KeyBar)
        assert not next(h for h in bar.hints if h.description == "Regenerate").enabled
        x, _ = _offset_of(bar, "Regenerate")
        assert bar.render().get_style_at_offset(app.console, x).dim
        await pilot.click(KeyBar, offset=(x, 0))
        await pilot.pause()
        assert rings == [True] and ran == []


async def test_hovering_a_hint_shows_its_tooltip(make_app: Any) -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await pilot.pause()
        bar = app.screen.query_one(KeyBar)
        await pilot.hover(KeyBar, offset=_offset_of(bar, "Quit"))
        await pilot.pause()
        assert bar.tooltip == "Quit at once (a running reply is stopped)"


async def test_the_keymap_names_the_rebound_key(make_app: Any) -> None:
    app = make_app(config_text='[keys]\n"app.help" = "f11"\n')
    async with app.run_test() as pilot:
        await pilot.pause()
        bar = app.screen.query_one(KeyBar)
        assert " f11 Help " in bar.render().plain
        await pilot.click(KeyBar, offset=_offset_of(bar, "Help"))
        await asyncio.sleep(0.05)
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)


async def test_the_keys_take_the_theme_colours(make_app: Any) -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await pilot.pause()
        bar = app.screen.query_one(KeyBar)

        def key_colour() -> object:
            return bar.render().get_style_at_offset(app.console, 1).color

        before = key_colour()
        await pilot.press("ctrl+t")  # the next theme
        await pilot.pause()
        assert key_colour() != before
        assert key_colour() == bar.get_component_rich_style("key-bar--key").color
