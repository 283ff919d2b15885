"""The app driven headless with Pilot and the scripted engine: chat, inspection, branching,
parameters, commands, themes and settings."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

from textual.message import Message
from textual.widgets import DataTable

from engine.core.api import SamplingParams
from engine.scripted import ScriptedEngine, ScriptedToken
from tui_helpers import SIZE, palette_run, screen_text, send, start_reply, wait_idle
from tui.app import messages as msg
from tui.app.application import LogitscopeApp
from tui.app.bindings import PARAM_KEYS, binding_ids
from engine.core.param_steps import PANEL_PARAMS, step_param
from tui.app.screens.dialogs import ValueDialog
from tui.app.screens.help import HelpScreen
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.message_views import AssistantView
from tui.app.widgets.params_panel import ParamsPanel
from tui.app.widgets.status_bar import StatusBar
from tui.app.widgets.transcript import Transcript


async def test_send_streams_a_reply_then_highlights_its_markdown(make_app: Any) -> None:
    seen: list[Message] = []
    app = make_app(ScriptedEngine(token_delay=0.005))
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await send(app, pilot, "hi")
        kinds = [type(m) for m in seen]
        assert msg.GenerationStarted in kinds and msg.GenerationFinished in kinds
        assert kinds.count(msg.ReplyGrew) >= 1
        path = app.controller.conversation.path()
        assert [n.role for n in path] == ["user", "assistant"]
        assert path[0].version.text == "hi"
        text = screen_text(app)
        assert "Hello! I am a scripted model." in text
        assert "- I show **candidates**" in text  # the model's text as it is: Markdown highlighted in place
        chunk = app.screen.query_one(AssistantView)._chunks[0]
        line = next(chunk.render_line(y) for y in range(chunk.size.height) if "candidates" in chunk.render_line(y).text)
        styles = {segment.text: segment.style for segment in line if segment.text in ("**", "candidates")}
        assert styles["candidates"] is not None and styles["candidates"].bold
        assert styles["**"] is not None and styles["**"].dim  # the markers kept, dimmed
        assert app.engine.requests[0].messages[-1].text == "hi"
        bar = app.screen.query_one(StatusBar)
        assert bar.stats is not None and bar.stats.generated_tokens == 20
        assert "decode 250.0 tok/s" in text and "ctx 22/4096" in text


async def test_fast_long_stream_is_coalesced(make_app: Any) -> None:
    """5,000 tokens as fast as the engine can: far fewer screen updates than tokens."""
    reply = [ScriptedToken(f" w{i}" + ("\n" if i % 40 == 39 else ""), 0.5, ((" x", 0.2),)) for i in range(5000)]
    seen: list[Message] = []
    app = make_app(ScriptedEngine([reply]))
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await wait_idle(app, pilot)
        params = app.controller.params.with_changes(max_tokens=6000)
        app.chat_screen.param_actions.set_params(params)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await send(app, pilot, "go")
        elapsed = loop.time() - started
        version = app.controller.conversation.path()[-1].version
        assert len(version.tokens or []) == 5000
        grew = sum(isinstance(m, msg.ReplyGrew) for m in seen)
        assert grew < 5000 / 10
        assert elapsed < 30
        view = app.screen.query_one(AssistantView)
        assert len(view._chunks) > 10  # chunked: a new token re-renders one chunk only


async def test_token_cursor_updates_candidates_panel(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape")  # leave the input: the transcript has focus
        assert isinstance(app.focused, Transcript)
        await pilot.press("right")  # first key selects the last token
        panel = app.screen.query_one(CandidatesPanel)
        tokens = app.controller.conversation.path()[-1].version.tokens
        assert tokens is not None and panel.token == tokens[-1]
        await pilot.press("home")
        assert panel.token == tokens[0]
        await pilot.press("right")
        assert panel.token == tokens[1]
        await pilot.press("left")
        assert panel.token == tokens[0]
        text = screen_text(app)
        assert "rank 1" in text and "entropy" in text and "Hi" in text  # an alternative is listed
        await pilot.press("n")  # next token below 10%: " scripted" (p = 0.05)
        assert panel.token is not None and panel.token.text == " scripted"
        assert math.exp(panel.token.logprob) < 0.1 and panel.token.rank == 4
        await pilot.press("backspace")
        assert panel.token is None


async def test_click_selects_a_token(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape", "right")  # inspect: the reply shows its tokens
        await pilot.pause()
        view = app.screen.query_one(AssistantView)
        chunk = view._chunks[0]
        await pilot.click(chunk, offset=(1, 0))
        assert app.screen.query_one(Transcript).cursor == (view.node, 0)
        assert app.screen.query_one(CandidatesPanel).token is view.tokens[0]


async def test_branch_on_candidate_and_flip_back(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        node = app.controller.conversation.path()[-1]
        first = node.version
        await pilot.press("escape", "right", "home")  # token 0: "Hello", candidates Hello/Hi/Hey/...
        await pilot.press("2")  # branch on candidate 2: "Hi"
        await wait_idle(app, pilot)
        request = engine.requests[-1]
        assert request.continue_last
        last = request.messages[-1]
        assert last.role == "assistant" and last.text == "Hi"
        assert last.token_ids == (first.tokens[0].candidates[1].id,)  # type: ignore[index]
        assert len(node.versions) == 2 and node.active == 1
        assert node.version.reply_text().startswith("Hi!")
        assert "branch 2/2" in screen_text(app)
        await pilot.press("escape", "right", "home")  # token 0: "Hi" in this branch
        assert app.screen.query_one(CandidatesPanel).token.text == "Hi"  # type: ignore[union-attr]
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert node.active == 0 and node.version is first
        assert "branch 1/2" in screen_text(app)
        cursor = app.screen.query_one(Transcript).cursor
        assert cursor is not None and cursor[0] is node
        assert app.screen.query_one(CandidatesPanel).token == first.tokens[cursor[1]]  # type: ignore[index]
        assert first.tokens[cursor[1]].text == "Hello"  # type: ignore[index]
        await pilot.press("right_square_bracket")
        assert node.active == 1


async def test_enter_on_candidates_panel_branches(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape", "right", "home")
        app.screen.query_one(CandidatesPanel).focus()
        await pilot.press("down", "down", "enter")  # candidate 3: "Hey"
        await wait_idle(app, pilot)
        assert app.controller.conversation.path()[-1].version.reply_text().startswith("Hey")


async def test_stop_cancels_at_once(make_app: Any) -> None:
    engine = ScriptedEngine(token_delay=0.2)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await start_reply(app, pilot)
        assert app.controller.busy
        await pilot.press("escape")
        await wait_idle(app, pilot)
        version = app.controller.conversation.path()[-1].version
        assert version.finish_reason == "cancelled"
        assert 0 < len(version.tokens or []) < 20
        assert "stopped" in screen_text(app)
        assert isinstance(app.focused, ChatInput)  # Escape while streaming stopped, it did not move focus


async def test_regenerate_keeps_old_reply_as_branch(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("ctrl+r")
        await wait_idle(app, pilot)
        node = app.controller.conversation.path()[-1]
        assert len(node.versions) == 2
        assert node.version.reply_text().startswith("Sure")  # the second script
        assert not engine.requests[-1].continue_last
        assert [m.role for m in engine.requests[-1].messages] == ["user"]


async def test_edit_last_message_and_resend(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("f4")
        await pilot.pause()
        area = app.screen.query_one("#text")
        area.text = "hello there"  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        await wait_idle(app, pilot)
        user = app.controller.conversation.path()[0]
        assert len(user.versions) == 2 and user.version.text == "hello there"
        assert engine.requests[-1].messages[-1].text == "hello there"
        assert "‹2/2›" in screen_text(app)


async def test_new_chat_and_system_prompt(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("ctrl+n")
        await pilot.pause()
        await pilot.press("d")  # asked first: discard it
        await pilot.pause()
        assert app.controller.conversation.root is None
        assert len(app.screen.query(AssistantView)) == 0
        await pilot.press("f2")
        await pilot.pause()
        app.screen.query_one("#text").text = "Be brief."  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "Be brief." in screen_text(app)
        await send(app, pilot, "yo")
        assert engine.requests[-1].messages[0].role == "system"
        assert engine.requests[-1].messages[0].text == "Be brief."


async def test_input_history_recall(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "first")
        await send(app, pilot, "second")
        box = app.screen.query_one(ChatInput)
        await pilot.press("up")
        assert box.text == "second"
        await pilot.press("up")
        assert box.text == "first"
        await pilot.press("down", "down")
        assert box.text == ""
        await pilot.press(*"a", "shift+enter", "b")
        assert box.text == "a\nb"


async def test_every_parameter_key_steps_up_and_down(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        app.screen.query_one(Transcript).focus()
        for name, _label in PANEL_PARAMS:
            key = PARAM_KEYS[name]
            before = app.controller.params
            await pilot.press(key)
            down = app.controller.params
            assert down == step_param(before, name, -1), name
            await pilot.press(key.upper())
            assert app.controller.params == step_param(down, name, 1), name
            await pilot.press(key.upper())
            assert app.controller.params == step_param(step_param(down, name, 1), name, 1), name
            assert len({getattr(p, name) for p in (before, down, app.controller.params)}) > 1, name
        assert engine._params == app.controller.params  # every change reached the engine
        assert f"{app.controller.params.temperature:.2f}" in screen_text(app)


async def test_param_change_mid_stream_applies_from_next_token(make_app: Any) -> None:
    engine = ScriptedEngine(token_delay=0.1)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await start_reply(app, pilot)
        app.screen.query_one(Transcript).focus()
        await pilot.press("T")
        await wait_idle(app, pilot)
        temps = [p.temperature for p in engine.params_seen]
        assert temps[0] == 0.7 and temps[-1] == 0.8
        assert app.screen.query_one(ParamsPanel).params.temperature == 0.8


async def test_typed_value_is_validated(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        panel = app.screen.query_one(ParamsPanel)
        panel.focus()
        await pilot.press("enter")  # temperature
        await pilot.pause()
        assert isinstance(app.screen, ValueDialog)
        value = app.screen.query_one("#value")
        value.value = "9"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ValueDialog)  # refused: still open
        assert "between 0.0 and 5.0" in screen_text(app)
        assert app.controller.params.temperature == 0.7
        value.value = "1.25"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, ValueDialog)
        assert app.controller.params.temperature == 1.25


async def test_presets_cycle(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("f5")
        assert app.chat_screen.param_actions.preset == "precise" and app.controller.params.temperature == 0.0
        await pilot.press("f5")
        assert app.chat_screen.param_actions.preset == "balanced" and app.controller.params.top_p == 0.95


async def test_heatmap_toggle_shows_tokens(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        view = app.screen.query_one(AssistantView)
        assert view.query_one("#tokens").display  # one face: the heatmap only colours it
        await pilot.press("f3")
        assert view.heat is not None and view.heat.by == "p" and view.query_one("#tokens").display
        await pilot.press("f3")
        assert view.heat is not None and view.heat.by == "entropy"
        await pilot.press("f3")
        assert view.heat is None


async def test_theme_cycle_and_command(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        assert app.theme == "logitscope-dark"
        await pilot.press("ctrl+t")
        assert app.theme != "logitscope-dark" and app.theme.startswith("logitscope")
        await palette_run(pilot, "Theme: logitscope-light")
        assert app.theme == "logitscope-light"


async def test_palette_runs_a_screen_action(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await palette_run(pilot, "Heatmap")
        assert app.chat_screen.heatmap


async def test_save_settings_round_trip(make_app: Any, config_path: Path) -> None:
    app = make_app(config_text='[ui]\nheatmap = true\n')
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        app.screen.query_one(Transcript).focus()
        await pilot.press("T", "K", "ctrl+t", "ctrl+s")
        theme = app.theme
        await pilot.pause()
    from engine.core.settings.config import load_config

    loaded = load_config(config_path).config
    assert loaded.sampling.temperature == 0.8 and loaded.sampling.top_k == 1
    assert loaded.ui.theme == theme and loaded.ui.heatmap  # the user's other settings are kept
    again = make_app()
    async with again.run_test(size=SIZE) as pilot:
        await wait_idle(again, pilot)
        assert again.theme == theme and again.controller.params.temperature == 0.8


async def test_broken_config_notifies_and_starts_on_defaults(make_app: Any) -> None:
    app = make_app(config_text='[sampling]\ntemperature = 99\n[keys]\n"chat.send" = "ctrl+nope"\n')
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        notes = [n.message for n in app._notifications]
        assert any("temperature" in n for n in notes)
        assert any("chat.send" in n for n in notes)
        assert app.controller.params == SamplingParams()
        await send(app, pilot, "hi")  # Enter still sends
        assert len(app.controller.conversation.path()) == 2


async def test_keymap_rebinds_by_id(make_app: Any) -> None:
    app = make_app(config_text='[keys]\n"param.temperature.up" = "ctrl+up"\n')
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        app.screen.query_one(Transcript).focus()  # parameter keys act outside the input
        await pilot.press("ctrl+up")
        assert app.controller.params.temperature == 0.8
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one(DataTable)
        rows = [tuple(table.get_row_at(i)) for i in range(table.row_count)]
        assert ("^↑", "temperature up", "chat", "param.temperature.up") in rows  # as the footer writes it
        assert len(rows) == len(binding_ids())  # every binding is listed


async def test_the_parameters_panel_names_the_keys_as_bound(make_app: Any) -> None:
    """#30.7: the panel read "t/T" whatever [keys] said."""
    app = make_app(config_text='[keys]\n"param.temperature.up" = "ctrl+up"\n"param.top_p.down" = "j"\n')
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        lines = screen_text(app).splitlines()
        assert any("t/^↑ temperature" in line for line in lines)
        assert any("j/P" in line and "top-p" in line for line in lines)
        assert any("k/K" in line and "top-k" in line for line in lines)  # not rebound: as before

