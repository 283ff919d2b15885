"""The first screen (#16.1): a welcome in the empty transcript (what the demo knows, the keys that
matter), a placeholder in the input, and a status bar that says what it is loading rather than
"no model  ctx 0/?"."""

from __future__ import annotations

from typing import Any

from engine.scripted import ScriptedEngine
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.status_bar import StatusBar
from tui_helpers import SIZE, screen_text, send, wait_idle, wait_until


async def test_the_empty_chat_says_what_to_do(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_idle(app, pilot)
        text = " ".join(screen_text(app).split())
        assert "Welcome to logitscope" in text and "capitals of about fifty countries" in text
        for keys in ("Enter sends.", "Esc, then ←/→", "1-9, 0 continue the reply"):
            assert keys in text
        assert app.screen.query_one(ChatInput).placeholder.startswith("Message the model · Enter sends")
        assert "Message the model" in screen_text(app)
        await send(app, pilot, "hi")
        assert "Welcome to logitscope" not in screen_text(app)


async def test_a_new_chat_brings_the_welcome_back(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("ctrl+n")
        await pilot.pause()
        await pilot.press("d")  # discard the old chat
        await wait_until(pilot, lambda: "Welcome to logitscope" in screen_text(app))


async def test_the_status_bar_says_what_it_is_loading(make_app: Any) -> None:
    app = make_app(ScriptedEngine(load_delay=1.0))
    async with app.run_test(size=SIZE) as pilot:
        bar = app.screen.query_one(StatusBar)
        seen: list[str] = []
        await wait_until(pilot, lambda: seen.append(bar.render().plain) or app.engine.model is not None)
        await pilot.pause()
        assert seen[0] in ("starting…", "loading demo…") and any(s.startswith("loading demo") for s in seen)
        assert not any("no model" in s or "ctx 0/?" in s for s in seen)
        assert "ready  ctx 0/4096" in bar.render().plain


async def test_the_welcome_names_a_model_that_is_not_the_demo(make_app: Any) -> None:
    """The demo's paragraph (capitals, colours, sums) is about the demo only: with another model
    loaded the welcome names that model instead, and keeps the keys."""
    app = make_app(config_text='[model]\ndefault = "someone/[b]tiny[/b]-chat"\n')
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.engine.model is not None)
        await wait_idle(app, pilot)
        text = " ".join(screen_text(app).split())
        assert "capitals of about fifty countries" not in text
        assert "You are chatting with someone/[b]tiny[/b]-chat." in text  # the name is data, not markup
        assert "Enter sends." in text and "1-9, 0 continue the reply" in text


async def test_a_model_without_a_chat_template_is_said_once(make_app: Any) -> None:
    """A model without a chat template (a base model, e.g. the gemma-3-270m GGUF file) runs as plain
    text: the welcome says so once, with the rule for the turns (README, "GGUF files")."""
    from engine.scripted import ScriptedEngine

    app = make_app(engine=ScriptedEngine(has_chat_template=False),
                   config_text='[model]\ndefault = "base-model"\n')
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.engine.model is not None)
        await wait_idle(app, pilot)
        text = " ".join(screen_text(app).split())
        assert text.count("no chat template: plain text") == 1
        assert "You are chatting with base-model. It has no chat template: plain text." in text
