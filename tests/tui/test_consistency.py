"""Small inconsistencies (#16.9): the parameter values stay put when "(off)" comes and goes,
reply headers write the temperature as the panel does, and n/N search every reply and say when
there is nothing more to find (the bell was invisible)."""

from __future__ import annotations

import re
from typing import Any

from engine.scripted import ScriptedEngine, ScriptedToken
from tui.app.widgets.message_views import AssistantView
from tui.app.widgets.transcript import Transcript
from tui_helpers import SIZE, screen_text, send, wait_until


def _value_ends(text: str) -> dict[str, int]:
    """Where each parameter's value ends on screen (its right edge)."""
    ends = {}
    for line in text.splitlines():
        for label, value in (("temperature", "0.70"), ("top-p", "1.00"), ("top-p", "0.95")):
            if f" {label} " in line and value in line:
                ends[f"{label} {value}"] = line.index(value, line.index(label)) + len(value)
    return ends


async def test_parameter_values_stay_put_when_off_goes(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        app.screen.query_one(Transcript).focus()
        before = _value_ends(screen_text(app))
        assert "(off)" in screen_text(app)
        await pilot.press("p")  # top-p 1.00 (off) -> 0.95
        await pilot.pause()
        after = _value_ends(screen_text(app))
        assert before["top-p 1.00"] == after["top-p 0.95"]
        assert before["temperature 0.70"] == after["temperature 0.70"]


async def test_headers_write_the_temperature_as_the_panel_does(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        app.screen.query_one(Transcript).focus()
        for _ in range(3):
            await pilot.press("T")  # 0.70 -> 1.00
        await send(app, pilot, "again")
        headers = [str(v.query_one("#header").render()) for v in app.screen.query(AssistantView)]
        assert "T=0.70" in headers[0] and "T=1.00" in headers[1]


async def test_n_searches_every_reply_and_says_when_there_is_no_more(make_app: Any) -> None:
    low = [["A", ScriptedToken(" b", 0.05, ((" x", 0.9),)), " c"], ["D", ScriptedToken(" e", 0.02, ((" y", 0.9),))]]
    app = make_app(ScriptedEngine(low))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "one")
        await send(app, pilot, "two")
        transcript = app.screen.query_one(Transcript)
        transcript.focus()
        first = app.controller.conversation.path()[1]
        transcript.select_token(first, 2)  # " c", after the first reply's only unlikely token
        await pilot.press("n")
        await pilot.pause()
        second = app.controller.conversation.path()[3]
        assert transcript.cursor == (second, 1)  # " e" in the next reply
        await pilot.press("n")
        await wait_until(pilot, lambda: any(n.message == "No token below 10% after this one."
                                            for n in app._notifications))
        await pilot.press("N")
        await pilot.pause()
        assert transcript.cursor == (first, 1)  # back to " b" in the first reply


async def test_the_value_dialog_names_a_parameter_as_the_panel_does(make_app: Any) -> None:
    from tui.app.screens.dialogs import ValueDialog
    from tui.app.widgets.params_panel import ParamsPanel

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        app.screen.query_one(ParamsPanel).focus()
        await pilot.press("down", "enter")  # top-p
        await wait_until(pilot, lambda: isinstance(app.screen, ValueDialog))
        assert app.screen.title_text == "Set top-p"


async def test_wide_characters_do_not_widen_the_candidates_table() -> None:
    """A CJK or emoji candidate was padded by characters, not cells: its row (and the panel's
    columns) came out wider than the others."""
    import math

    from rich.cells import cell_len
    from textual.app import App

    from engine.core.api import Candidate, TokenEvent
    from tui.app.widgets.candidates import CHARS, CandidatesPanel

    texts = [" plain", " 日本語の文字列です", " 🇺🇸 flag", " ok"]
    token = TokenEvent(0, 1, " ok", " ok", math.log(0.1), 0.1, 4, 1.0,
                       tuple(Candidate(i, t, math.log(0.2), 0.2) for i, t in enumerate(texts)))
    app: App[None] = App()
    async with app.run_test(size=(60, 20)) as pilot:
        panel = CandidatesPanel()
        await app.mount(panel)
        await pilot.pause()
        rows = panel._table(token).plain.split("\n")[1:]
        assert {cell_len(row) for row in rows} == {cell_len(rows[0])}, "every row as wide as the others"
        plain = next(row for row in rows if "plain" in row)
        assert plain[3 + CHARS] == " " and plain[4 + CHARS] == "█", "the text column is CHARS cells"


async def test_the_status_bar_says_reused_and_gives_way_by_whole_facts(make_app: Any) -> None:
    """Before: 'cache 0/2' (cryptic), and at 80 columns 'scrip…d-demo' with the speeds cut off."""
    from tui.app.widgets.status_bar import StatusBar

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await send(app, pilot, "hi")
        line = app.screen.query_one(StatusBar).render().plain
        assert line.startswith("scripted-demo  ") and "…" not in line
        assert re.search(r"  ready  ctx \d+/4096  reused 0 of 2$", line)  # the speeds went, whole
    app = make_app()
    async with app.run_test(size=(160, 24)) as pilot:
        await send(app, pilot, "hi")
        line = app.screen.query_one(StatusBar).render().plain
        assert "reused 0 of 2  ttft" in line and line.endswith("decode 250.0 tok/s")


async def test_the_palette_lists_each_action_once(make_app: Any) -> None:
    """Before: "Quit" and "Quit [ctrl+q]", "Theme" and "Pick theme", "Keys" and "Help"."""
    from textual.command import CommandList, CommandPalette

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette))

        def prompts() -> list[str]:
            options = app.screen.query(CommandList)
            if not options:
                return []
            found = options.first()
            return [str(found.get_option_at_index(i).prompt).split("\n")[0] for i in range(found.option_count)]

        await wait_until(pilot, lambda: len(prompts()) > 10)
        listed = prompts()
        assert "Quit  [^q]" in listed and "Quit" not in listed
        assert "Pick theme  [f8]" in listed and "Theme" not in listed
        assert "Help  [f1]" in listed and "Keys" not in listed


async def test_ctx_follows_a_resumed_chat_and_a_branch_flip(make_app: Any) -> None:
    """Before: 'ctx 0/4096' after resuming four messages, and no change after a branch flip."""
    from tui.app.widgets.status_bar import StatusBar
    from tui_helpers import chat_and_quit, wait_idle

    def ctx(app: Any) -> str:
        line = app.screen.query_one(StatusBar).render().plain
        return line.split("ctx ")[1].split()[0]

    await chat_and_quit(make_app)
    app = make_app(ScriptedEngine())
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: len(app.controller.conversation.path()) == 2)
        await wait_until(pilot, lambda: ctx(app) not in ("0/4096",))
        resumed = int(ctx(app).split("/")[0])
        assert resumed > 20  # the resumed chat, cached
        await send(app, pilot, "more")
        await pilot.press("ctrl+r")
        await wait_idle(app, pilot)
        after_regenerate = ctx(app)
        transcript = app.screen.query_one(Transcript)
        transcript.focus()
        await pilot.press("up", "left_square_bracket")  # the other (longer or shorter) version
        await wait_until(pilot, lambda: ctx(app) != after_regenerate)


async def test_the_candidates_columns_stay_put_whatever_the_values() -> None:
    """Walking or scrolling changed the rows shown, and with them the widest number: the grid
    moved a column left when every raw value shown was under 10% (a hostile pass saw it jitter)."""
    import math

    from rich.cells import cell_len
    from textual.app import App

    from engine.core.api import Candidate, TokenEvent
    from tui.app.widgets.candidates import CandidatesPanel

    def token(p: float) -> TokenEvent:
        cands = tuple(Candidate(i, f" t{i}", math.log(p), p) for i in range(3))
        return TokenEvent(0, 0, " t0", " t0", math.log(p), p, 1, 1.0, cands)

    app: App[None] = App()
    async with app.run_test(size=(60, 20)) as pilot:
        panel = CandidatesPanel()
        await app.mount(panel)
        await pilot.pause()
        small, large = (panel._table(token(p)).plain.split("\n")[1:] for p in (0.042, 0.863))
        assert {cell_len(row) for row in small + large} == {cell_len(large[0])}
