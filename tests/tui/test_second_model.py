"""A second model reads the chat (#33, item 5): opened beside the first, the side panel shows the
token under the cursor under both models, F3 colours by disagreement, e / E jump to where their
first choices differ, and it closes (also at quit)."""

from __future__ import annotations

from typing import Any

from engine.scripted import ScriptedEngine, ScriptedToken
from tui.app.widgets.second_line import SecondLine
from tui.app.widgets.transcript import Transcript
from tui_helpers import SIZE, send, wait_until

REPLY = ["Once", " upon", " a", " time"]


def _second() -> ScriptedEngine:
    """A reader that finds " upon" unlikely and would have said " in" there."""
    return ScriptedEngine(name="reader", scored={"upon": ScriptedToken("upon", 0.02, (("in", 0.7),))})


async def _opened(app: Any, pilot: Any) -> Any:
    screen = app.chat_screen
    screen.second_engine_factory = _second
    await send(app, pilot, "tell me")
    await screen.second.open_model("reader")
    await wait_until(pilot, lambda: screen.second.comparison is not None)
    await pilot.pause()
    return screen


async def test_the_panel_shows_the_token_under_both_models(make_app: Any) -> None:
    app = make_app(ScriptedEngine([REPLY]))
    async with app.run_test(size=SIZE) as pilot:
        screen = await _opened(app, pilot)
        line = screen.query_one(SecondLine)
        assert line.display and "2nd model: reader" in str(line.render())
        transcript = screen.query_one(Transcript)
        reply = app.controller.conversation.path()[-1]
        transcript.select_token(reply, 1)  # " upon"
        await wait_until(pilot, lambda: "Δ" in str(line.render()))
        text = str(line.render())
        assert "token: p 25% / 2%  Δ +2.53" in text and text.endswith("≠")


async def test_d_jumps_to_where_the_first_choices_differ_and_f3_colours_by_disagreement(make_app: Any) -> None:
    app = make_app(ScriptedEngine([REPLY]))
    async with app.run_test(size=SIZE) as pilot:
        screen = await _opened(app, pilot)
        transcript = screen.query_one(Transcript)
        transcript.focus()
        await pilot.press("e")
        reply = app.controller.conversation.path()[-1]
        await wait_until(pilot, lambda: transcript.cursor == (reply, 1))
        for _ in range(3):
            if screen.heat_mode == "disagreement":
                break
            await pilot.press("f3")
        assert screen.heat_mode == "disagreement"
        heat = transcript.heat
        upon, once = reply.version.tokens[1], reply.version.tokens[0]
        assert heat is not None and heat.token_band(upon) == 0 and heat.token_band(once) == 4
        await screen.second.close_model()
        assert screen.heat_mode is None and not screen.query_one(SecondLine).display


async def test_opening_refused_says_why_in_one_line(make_app: Any) -> None:
    app = make_app(ScriptedEngine([REPLY]))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.chat_screen
        screen.second_engine_factory = lambda: ScriptedEngine(load_error="no such model: nope")
        await send(app, pilot, "tell me")
        await screen.second.open_model("nope")
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert "Not opened: no such model: nope" in said and not screen.second.open


async def test_the_second_model_reads_replies_as_text_even_under_the_same_folder_name(make_app: Any) -> None:
    """Two engines may name one folder and not share a vocabulary (two scripted doubles do): the
    second reads each reply's text; its ids would be other words (the whole reply came out as one
    inexact span, its first choice the role marker)."""
    app = make_app(ScriptedEngine([REPLY]))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.chat_screen
        screen.second_engine_factory = ScriptedEngine
        await send(app, pilot, "tell me")
        await screen.second.open_model("demo")
        await wait_until(pilot, lambda: screen.second.comparison is not None)
        reply = app.controller.conversation.path()[-1]
        spans = screen.second.comparison.of(reply).spans
        assert len(spans) == len(REPLY) and all(s.exact and len(s.a) == len(s.b) == 1 for s in spans)
