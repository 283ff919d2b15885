"""Forks (#33.4): f / F jump to the tokens where the model was unsure, each reply's header
counts them, the candidates panel marks one, and the thresholds are set in config.toml, from the
palette, and kept by "Save settings".

The demo script's first reply has three forks by the rule `LOOSE` (entropy above 1 nat or the
top two within 10 points): "Hello" (entropy 1.10), " scripted" (1.39) and " branches" (its top
two 0.34 / 0.33, 1 point apart); every other token is 0.9 likely (entropy 0.33). By the default
rule (2 nats, 5 points) only " branches" is one."""

from __future__ import annotations

import tomllib
from typing import Any

from tui_helpers import SIZE, palette_run, screen_text, send, wait_until

from engine.core.forks import ForkRule
from engine.scripted import ScriptedEngine
from textual.widgets import DataTable

from tui.app.screens.dialogs import ValueDialog
from tui.app.screens.help import HelpScreen
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.message_views import AssistantView
from tui.app.widgets.previews import PreviewsPanel
from tui.app.widgets.transcript import Transcript

HELLO, SCRIPTED, BRANCHES = 0, 5, 18  # the forks' indices in the first reply
LOOSE = "[ui]\nfork_entropy = 1.0\nfork_margin = 0.1\n"


def cursor(app: Any) -> int | None:
    at = app.screen.query_one(Transcript).cursor
    return None if at is None else at[1]


def header(app: Any) -> str:
    view = app.screen.query(AssistantView).last()
    return str(view.query_one("#header").render())


async def test_f_and_shift_f_step_through_the_forks(make_app: Any) -> None:
    app = make_app(config_text=LOOSE)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape", "f")  # nothing selected: from the chat's first token
        await wait_until(pilot, lambda: cursor(app) == HELLO)
        await pilot.press("f")
        await wait_until(pilot, lambda: cursor(app) == SCRIPTED)
        await pilot.press("f")
        await wait_until(pilot, lambda: cursor(app) == BRANCHES)
        await pilot.press("F")
        await wait_until(pilot, lambda: cursor(app) == SCRIPTED)
        await pilot.press("f", "f")
        await wait_until(pilot, lambda: any(n.message.startswith("No fork (entropy > 1 nats or top two within 10 points)")
                                            and n.message.endswith("after this one.") for n in app._notifications))
        assert cursor(app) == BRANCHES


async def test_the_key_bar_and_help_name_the_fork_keys(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape")
        await wait_until(pilot, lambda: " f Fork " in screen_text(app).splitlines()[-1])
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        table = app.screen.query_one(DataTable)
        rows = [tuple(str(cell) for cell in table.get_row_at(i)) for i in range(table.row_count)]
        assert any("f" in row and "token.next_fork" in row for row in rows)
        assert any("F" in row and "token.prev_fork" in row for row in rows)


async def test_f_goes_on_into_the_next_reply(make_app: Any) -> None:
    app = make_app(config_text=LOOSE)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await send(app, pilot, "more")  # " list": 0.45 / 0.3 / rest 0.25, entropy 1.07
        await pilot.press("escape", "f", "f", "f", "f")
        transcript = app.screen.query_one(Transcript)
        second = app.controller.conversation.path()[-1]
        await wait_until(pilot, lambda: transcript.cursor == (second, 5))


async def test_the_header_counts_the_forks_and_the_panel_marks_one(make_app: Any) -> None:
    app = make_app(config_text=LOOSE)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        assert "20 tok · 3 forks" in header(app)
        await pilot.press("escape", "f")
        await wait_until(pilot, lambda: cursor(app) == HELLO)
        summary = app.screen.query_one(CandidatesPanel).render()
        assert "entropy 1.10 nats  fork" in str(summary.renderables[0])  # type: ignore[attr-defined]
        await pilot.press("right")  # "!": no fork
        await wait_until(pilot, lambda: cursor(app) == 1)
        summary = app.screen.query_one(CandidatesPanel).render()
        assert "fork" not in str(summary.renderables[0])  # type: ignore[attr-defined]


async def test_by_default_only_a_near_tie_or_a_wide_spread_is_a_fork(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        assert "20 tok · 1 fork" in header(app)
        await pilot.press("escape", "f")
        await wait_until(pilot, lambda: cursor(app) == BRANCHES)


async def test_thresholds_from_config_and_zero_switches_a_test_off(make_app: Any) -> None:
    app = make_app(config_text="[ui]\nfork_entropy = 0\nfork_margin = 0.05\n")
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        assert "1 fork" in header(app) and "1 forks" not in header(app)
        await pilot.press("escape", "f")
        await wait_until(pilot, lambda: cursor(app) == BRANCHES)


async def test_a_bad_threshold_in_config_is_one_line_and_the_default_stays(make_app: Any) -> None:
    app = make_app(config_text="[ui]\nfork_entropy = -1\n")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: any("fork_entropy: must be between 0.0 and 20.0" in n.message
                                            for n in app._notifications))
        assert app.screen.query_one(Transcript).forks == ForkRule()


async def test_the_palette_sets_a_threshold_refusing_a_bad_one(make_app: Any) -> None:
    app = make_app(config_text=LOOSE)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await palette_run(pilot, "Set fork entropy")
        await wait_until(pilot, lambda: isinstance(app.screen, ValueDialog))
        await pilot.press(*("backspace",) * 5, *"25", "enter")
        await wait_until(pilot, lambda: "a number from 0 to 20, got 25" in screen_text(app))
        await pilot.press("backspace", "backspace", *"0", "enter")  # entropy off: only the margin's fork
        await wait_until(pilot, lambda: not isinstance(app.screen, ValueDialog))
        await wait_until(pilot, lambda: "1 fork" in header(app))
        await pilot.press("escape", "end", "F")
        await wait_until(pilot, lambda: cursor(app) == BRANCHES)
        await pilot.press("F")
        await wait_until(pilot, lambda: any(n.message == "No fork (top two within 10 points) before this one."
                                            for n in app._notifications))


async def test_save_settings_keeps_the_fork_thresholds(make_app: Any, config_path: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.engine.model is not None)
        app.chat_screen.scope.set_forks(ForkRule(entropy=2.5, margin=0.02))
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.loaded.user_path.exists())
    saved = tomllib.loads(app.loaded.user_path.read_text(encoding="utf-8"))
    assert saved["ui"]["fork_entropy"] == 2.5 and saved["ui"]["fork_margin"] == 0.02


async def test_a_fork_reached_by_f_gets_its_what_if_previews(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine, config_text=LOOSE + "[preview]\ndelay_ms = 30\n")
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape", "f", "f")
        await wait_until(pilot, lambda: cursor(app) == SCRIPTED)
        await wait_until(pilot, lambda: [row[0] for row in app.screen.query_one(PreviewsPanel).rows]
                         == [" small", " tiny", " demo"])
        assert len(engine.preview_requests[-1].messages[-1].token_ids or ()) == SCRIPTED
