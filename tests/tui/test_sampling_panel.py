"""The sampling lab in the app: the order from the palette, the stages beyond the usual rows in
the panel while on, and bias from the candidates panel (ban, raise, lower), listed by text."""

from __future__ import annotations

from typing import Any

from tui_helpers import SIZE, palette_run, screen_text, send, wait_idle

from engine.core.params import MLX_LM_ORDER
from engine.scripted import ScriptedEngine
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.transcript import Transcript

TALL = (SIZE[0], 60)  # room for the parameters panel under the candidates


async def test_the_order_from_the_palette_and_new_stages_in_the_panel(make_app: Any) -> None:
    app = make_app(ScriptedEngine())
    async with app.run_test(size=TALL) as pilot:
        await wait_idle(app, pilot)
        assert "llama.cpp" in screen_text(app) and "DRY multiplier" not in screen_text(app)
        await palette_run(pilot, "Sampler order: mlx-lm")
        await pilot.pause()
        assert app.controller.params.samplers == MLX_LM_ORDER
        assert "mlx-lm" in screen_text(app)
        app.screen.query_one(Transcript).focus()
        await pilot.press("D")  # DRY multiplier up: its rows appear while it is on
        await pilot.pause()
        assert app.controller.params.dry_multiplier == 0.1
        assert "DRY multiplier" in screen_text(app) and "DRY base" in screen_text(app)
        assert app.controller.engine._params == app.controller.params  # reached the engine


async def test_ban_raise_and_lower_a_candidate(make_app: Any) -> None:
    app = make_app(ScriptedEngine())
    async with app.run_test(size=TALL) as pilot:
        await wait_idle(app, pilot)
        await send(app, pilot, "hello")
        await wait_idle(app, pilot)
        app.screen.query_one(Transcript).focus()
        await pilot.press("left")
        panel = app.screen.query_one(CandidatesPanel)
        panel.focus()
        await pilot.pause()
        assert panel.token is not None
        first = panel.token.candidates[0]
        await pilot.press("b")
        await pilot.pause()
        assert dict(app.controller.params.logit_bias) == {first.id: -100.0}
        assert "bias" in screen_text(app)
        await pilot.press("b")  # again: unban
        await pilot.press("plus", "plus", "minus")
        await pilot.pause()
        assert dict(app.controller.params.logit_bias) == {first.id: 2.0}
