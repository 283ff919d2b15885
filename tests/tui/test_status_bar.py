"""The status bar: a long model name gives way to the figures after it."""

from __future__ import annotations

from typing import Any

from engine.scripted import ScriptedEngine
from tui_helpers import wait_idle
from tui.app.widgets.status_bar import StatusBar


def test_fit_name_cuts_long_names_in_the_middle() -> None:
    from tui.app.widgets.status_bar import fit_name

    assert fit_name("demo", 40) == "demo"
    name = "mlx-community/Qwen2.5-Coder-32B-Instruct-abliterated-4bit"
    short = fit_name(name, 24)
    assert len(short) == 24 and short.startswith("mlx-commun") and short.endswith("ated-4bit") and "…" in short
    assert len(fit_name(name, 3)) == 12  # never shorter than that: the facts wrap before the name vanishes


async def test_a_long_model_name_leaves_room_for_the_facts(make_app: Any) -> None:
    app = make_app(ScriptedEngine())
    async with app.run_test(size=(90, 30)) as pilot:
        await wait_idle(app, pilot)
        bar = app.screen.query_one(StatusBar)
        bar.model = "mlx-community/" + "Very-Long-Model-Name-" * 6 + "4bit"
        await pilot.pause()
        line = bar.render().plain
        assert "ctx 0/" in line and len(line) <= bar.content_size.width
        assert "…" in line and line.startswith("mlx-commun") and "4bit  " in line
