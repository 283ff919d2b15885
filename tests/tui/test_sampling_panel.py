"""The sampling lab in the app: the order from the palette, the stages beyond the usual rows in
the panel while on, and bias from the candidates panel (ban, raise, lower), listed by text."""

from __future__ import annotations

from typing import Any

from tui_helpers import SIZE, palette_run, screen_text, send, wait_idle, wait_until

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


async def test_the_model_s_recommended_settings_beside_the_live_ones(make_app: Any) -> None:
    from dataclasses import replace

    from tui.app.widgets.params_panel import ParamsPanel

    engine = ScriptedEngine()
    original = engine.load

    async def load(*args: Any, **kwargs: Any) -> Any:
        info = await original(*args, **kwargs)
        engine._model = replace(info, recommended=(("temperature", 0.6), ("top_k", 20)))
        return engine._model

    engine.load = load  # type: ignore[method-assign]
    app = make_app(engine)
    async with app.run_test(size=TALL) as pilot:
        await wait_idle(app, pilot)
        await pilot.pause()
        assert app.screen.query_one(ParamsPanel).recommended == {"temperature": 0.6, "top_k": 20}
        assert "model: 0.6" in screen_text(app)
        app.screen.query_one(Transcript).focus()
        await pilot.press("O")
        await pilot.pause()
        assert (app.controller.params.temperature, app.controller.params.top_k) == (0.6, 20)


async def test_the_biases_are_a_labelled_list_of_text_and_id(make_app: Any) -> None:
    """Each bias is a row of its own: the token's text and its id, and its value; a bias set
    another way (the palette, a config, a reopened chat) finds its text in the chat (#32.4)."""
    from dataclasses import replace as changed

    from tui.app.widgets.params_panel import ParamsPanel

    app = make_app(ScriptedEngine())
    async with app.run_test(size=TALL) as pilot:
        await send(app, pilot, "hello")
        app.screen.query_one(Transcript).focus()
        await pilot.press("home")
        panel = app.screen.query_one(CandidatesPanel)
        panel.focus()
        await pilot.pause()
        assert panel.token is not None
        first, second = panel.token.candidates[:2]
        await pilot.press("b", "down", "plus")
        await pilot.pause()
        text = screen_text(app)
        assert f"'{first.text}' #{first.id}" in text and f"'{second.text}' #{second.id}" in text
        assert "ban" in text and "+2" in text
        app.screen._bias_names.clear()  # as after a restart: the text comes from the chat itself
        app.screen.set_params(changed(app.controller.params, logit_bias=((second.id, -3.0),)))
        await pilot.pause()
        assert f"'{second.text}' #{second.id}" in screen_text(app) and "-3" in screen_text(app)
        assert app.screen.query_one(ParamsPanel).bias_labels == {second.id: second.text}


async def test_set_logit_bias_takes_tokens_by_text_and_refuses_a_phrase(make_app: Any) -> None:
    """The palette's dialog: ids and quoted texts, the texts turned into their token by the
    engine; a phrase of several tokens is one line and changes nothing (#32.4)."""
    from tui.app.screens.dialogs import ValueDialog
    from tui.app.widgets.params_panel import ParamsPanel

    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=TALL) as pilot:
        await send(app, pilot, "hello")
        hi = engine._vocab.id_of("Hi")
        app.screen.edit_param("logit_bias")
        await pilot.pause()
        assert isinstance(app.screen, ValueDialog)
        app.screen.query_one("#value").value = "'Hi'=ban, 7=1.5"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_idle(app, pilot)
        await pilot.pause()
        assert dict(app.controller.params.logit_bias) == {hi: -100.0, 7: 1.5}
        assert app.screen.query_one(ParamsPanel).bias_labels[hi] == "Hi"
        app.screen.edit_param("logit_bias")
        await pilot.pause()
        app.screen.query_one("#value").value = "'good morning'=ban"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_until(pilot, lambda: any("banning a phrase" in n.message for n in app._notifications))
        assert any("banning a phrase is not supported" in n.message and "\n" not in n.message
                   for n in app._notifications)
        assert dict(app.controller.params.logit_bias) == {hi: -100.0, 7: 1.5}


def test_the_dialog_s_syntax() -> None:
    import pytest

    from engine.core.api import ParamError
    from tui.app.bias_entry import parse_entries

    assert parse_entries("5=ban, ' the'=-2; \"a,b\"=3, x=1") == ((5, -100.0), (" the", -2.0), ("a,b", 3.0), ("x", 1.0))
    assert parse_entries("'42'=1") == (("42", 1.0),)  # quoted digits are a text
    assert parse_entries("") == ()
    for bad in ("5", "5=many", "5=500", "''=1", "=3"):
        with pytest.raises(ParamError):
            parse_entries(bad)
