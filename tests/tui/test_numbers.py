"""Numbers a person can read (#16.5): small probabilities are never "0.0%", the panel switches to
log-probabilities, the heatmap tells 18.7% / 0.5% / 0.01% apart in 256 colours, colours by
entropy too, says what its colours mean, and F1 explains the numbers."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from textual.color import Color

from engine.core.api import Candidate, TokenEvent
from engine.scripted import ScriptedEngine, ScriptedToken
from tui.app.contrast import distance, eight_bit, reduced
from tui.app.screens.help import HelpScreen
from tui.app.themes import load_builtin_themes
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.heat_legend import HeatLegend
from tui.app.widgets.render import HeatPalette, percent
from tui.app.widgets.transcript import Transcript
from tui_helpers import SIZE, screen_text, send, wait_until

RARE = ScriptedToken(" zebra", 3e-5, ((" cat", 0.6), (" dog", 0.3), (" owl", 0.0004)))


def test_small_probabilities_are_never_zero_percent() -> None:
    assert [percent(p) for p in (0.187, 0.005, 0.001, 0.0004, 3e-5, 0.0)] == \
        ["18.7%", "0.5%", "0.1%", "<0.1%", "<0.1%", "0%"]
    assert percent(3e-5, precise=True) == "3.0e-5" and percent(math.nan) == "?"


async def test_a_sampled_rare_token_shows_its_probability(make_app: Any) -> None:
    """The bug: 'p raw 0.0% sampled 0.0%' for a token that was drawn; alternatives '0.0%'."""
    app = make_app(ScriptedEngine([["A", RARE]]))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        panel = app.screen.query_one(CandidatesPanel)
        assert panel.token is not None and panel.token.text == " zebra"
        text = screen_text(app)
        assert not re.search(r"(?<![\d.])0\.0%", text)
        assert "p raw 3.0e-5  sampled" in text and "<0.1%" in text  # the token itself; " owl" in the table


async def test_u_switches_the_panel_to_log_probabilities(make_app: Any) -> None:
    app = make_app(ScriptedEngine([["A", RARE]]))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        app.screen.query_one(Transcript).focus()
        await pilot.press("u")
        await pilot.pause()
        text = screen_text(app)
        assert "log p raw -10.41  sampled" in text and "log raw" in text
        assert "-0.51" in text  # " cat": log 0.6
        await pilot.press("u")
        await pilot.pause()
        assert "p raw 3.0e-5" in screen_text(app)


def _probe_colours(palette: HeatPalette) -> list[Color]:
    return [palette.colour(p) for p in (0.187, 0.005, 0.0001)]


@pytest.mark.parametrize("theme", load_builtin_themes(), ids=lambda t: t.name)
def test_heat_tells_decades_apart_in_256_colours(theme: Any) -> None:
    """18.7%, 0.5% and 0.01% were one colour (xterm 52) in 256 colours: a blend of dark colours
    on a linear scale of p. Now log-scale bands, each its own xterm colour, far enough apart to
    see (delta E >= 10), in truecolor and reduced."""
    variables = {**theme.variables, "foreground": theme.foreground}
    colours = _probe_colours(HeatPalette.from_variables(variables))
    assert len({eight_bit(c) for c in colours}) == 3, theme.name
    for i, a in enumerate(colours):
        for b in colours[i + 1:]:
            assert distance(a, b) >= 10 and distance(reduced(a), reduced(b)) >= 10, theme.name


def test_heat_by_entropy_puts_a_sure_model_at_the_warm_end() -> None:
    palette = HeatPalette(Color.parse("#ff0000"), Color.parse("#ffff00"), Color.parse("#00ff00"), "entropy")
    token = TokenEvent(0, 1, "a", "a", math.log(0.005), 0.01, 5, 0.1, (Candidate(1, "a", math.log(0.005), 0.01),))
    assert palette.token_colour(token) == palette.bands[-1]  # unlikely, but the model was sure
    assert palette.switched("p").token_colour(token) == palette.bands[1]
    assert palette.entropy_band(4.0) == 0 and palette.entropy_band(math.nan) == 0
    assert palette.entropy_band(None) is None  # a remote engine's unknown entropy: no colour


async def test_f3_cycles_probability_entropy_off_with_a_legend(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        legend = app.screen.query_one(HeatLegend)
        assert not legend.display or legend.has_class("-off")
        await pilot.press("f3")
        await pilot.pause()
        line = screen_text(app)
        assert "heat: p raw  <0.1%  <1%  <10%  <50%  ≥50%  F3: by entropy" in line
        await pilot.press("f3")
        await pilot.pause()
        assert "heat: entropy  ≥3  <3  <2  <1  <0.5 nats  F3: off" in screen_text(app)
        await pilot.press("f3")
        await pilot.pause()
        assert legend.has_class("-off") and "heat:" not in screen_text(app)


async def test_f1_explains_the_numbers(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        text = screen_text(app)
        for name, first_words in (("p raw", "the model's own probability"), ("sampled", "its probability where it was"),
                                  ("rank", "its place among all tokens"), ("entropy", "how spread p raw is")):
            assert f"{name}  {first_words}" in text
