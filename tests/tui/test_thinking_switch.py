"""The thinking switch in the app (#16.7): F12 sets it for the next replies where the model's
template has one; each reply keeps the switch it was written under, so later turns render the
history exactly; the status bar shows it only where it does something."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from textual.widgets import Static

from engine.core.chat.fileformat import conversation_from_dict, conversation_to_dict
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.message_views import AssistantView
from tui.app.widgets.status_bar import StatusBar
from tui.app.widgets.thinking_fold import ThinkingBlock, thinking_block
from tui.app.widgets.token_chunk import TokenChunk
from tui.app.widgets.transcript import Transcript
from test_previews import FAST, all_done
from tui_helpers import SIZE, send, wait_idle, wait_until

from engine.core.api import TokenEvent
from engine.scripted import ScriptedEngine


def _bar(app: Any) -> str:
    return app.screen.query_one(StatusBar).render().plain


async def test_f12_switches_thinking_for_the_next_replies_and_each_keeps_its_own(make_app: Any) -> None:
    engine = ScriptedEngine(supports_thinking=True)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        assert "think auto" in _bar(app)
        await pilot.press("f12")  # from the chat input: the key is the screen's
        await pilot.pause()
        assert "think off" in _bar(app)
        await send(app, pilot, "hi")
        assert engine.requests[-1].thinking is False
        await pilot.press("f12")
        await send(app, pilot, "more")
        request = engine.requests[-1]
        assert request.thinking is True and "think on" in _bar(app)
        assert [m.thinking for m in request.messages if m.role == "assistant"] == [False]


async def test_a_model_without_the_switch_shows_none_and_says_so(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("f12")
        await pilot.pause()
        assert "think" not in _bar(app) and app.controller.thinking is None
        assert any("no thinking switch" in str(n.message) for n in app._notifications)
        await send(app, pilot, "hi")
        assert engine.requests[-1].thinking is None


async def test_a_saved_chat_keeps_each_replys_switch(make_app: Any, tmp_path: Path) -> None:
    app = make_app(ScriptedEngine(supports_thinking=True))
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("f12")
        await send(app, pilot, "hi")
        conversation = app.controller.conversation
    again = conversation_from_dict(json.loads(json.dumps(conversation_to_dict(conversation))))
    assert [m.thinking for m in again.messages() if m.role == "assistant"] == [False]


THINKING_REPLY = ("<think>", "\nhmm", " [b]not markup[/b]", "\n</think>", "\n\n", "Paris", " is", " big", ".")


def _view(app: Any) -> AssistantView:
    return list(app.screen.query(AssistantView))[-1]


async def test_a_thinking_block_shows_folded_and_z_unfolds_it_with_its_tokens(make_app: Any) -> None:
    app = make_app(ScriptedEngine([THINKING_REPLY]))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        view = _view(app)
        fold = view.query_one("#thinking", Static)
        assert "thinking… 5 tokens" in str(fold.render()) and fold.display
        shown = "".join(str(c.render()) for c in view.query(TokenChunk))
        assert "hmm" not in shown and "Paris" in shown
        transcript = app.screen.query_one(Transcript)
        transcript.focus()
        await pilot.press("z")
        await pilot.pause()
        assert not view.folded and "hmm" in "".join(str(c.render()) for c in view.query(TokenChunk))
        await pilot.press("home")  # the first token: a thinking token, inspectable as any
        await pilot.pause()
        token = app.screen.query_one(CandidatesPanel).token
        assert transcript.cursor == (view.node, 0) and token is not None and token.text == "<think>"
        await pilot.press("z")  # folding it again leaves the token it hid
        await pilot.pause()
        assert view.folded and transcript.cursor is None


async def test_inspecting_a_folded_thinking_token_unfolds_it(make_app: Any) -> None:
    app = make_app(ScriptedEngine([THINKING_REPLY]))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        view = _view(app)
        app.screen.query_one(Transcript).focus()
        await pilot.press("left", "home")
        await pilot.pause()
        assert not view.folded and view.cursor == 0
        assert any(c.start == 0 for c in view.query(TokenChunk))


async def test_a_reply_without_a_block_has_no_fold_line(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        assert not _view(app).query_one("#thinking", Static).display


async def test_a_streaming_reply_folds_its_block_as_it_arrives(make_app: Any) -> None:
    engine = ScriptedEngine([THINKING_REPLY], token_delay=0.05, hold_after=3)  # still in the block, however busy the CPU
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        app.screen.query_one("ChatInput").focus()
        await pilot.press("h", "i", "enter")
        await wait_until(pilot, lambda: len(app.controller.conversation.path()) == 2
                         and len(app.controller.conversation.path()[-1].version.tokens or ()) >= 3)
        view = _view(app)
        await wait_until(pilot, lambda: "still thinking" in str(view.query_one("#thinking", Static).render()))
        assert "hmm" not in "".join(str(c.render()) for c in view.query(TokenChunk))
        engine.release()
        await wait_idle(app, pilot)
        assert [c.start for c in view.query(TokenChunk)] == [5]


def test_the_block_ends_after_its_close_tag_and_the_blank_lines() -> None:
    def tokens(*texts: str) -> list[Any]:
        return [TokenEvent(i, i, t, t, 0.0, None, None, None, ()) for i, t in enumerate(texts)]
    assert thinking_block(tokens("\n<th", "ink>", "x</thi", "nk>", "\n", "A")) == ThinkingBlock(5, True)
    assert thinking_block(tokens("<think>", "x")) == ThinkingBlock(2, False)
    assert thinking_block(tokens("A", "<think>")) is None and thinking_block(tokens("<")) is None


async def test_a_preview_and_its_branch_keep_the_replys_switch(make_app: Any) -> None:
    """Else a preview of a reply written without thinking renders another prompt than the reply
    had (the default generation prompt), and the branch that equals it too."""
    engine = ScriptedEngine(supports_thinking=True)
    app = make_app(engine, config_text=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("f12")
        await send(app, pilot, "hi")
        await pilot.press("escape", "right", "home")
        await wait_until(pilot, lambda: all_done(app))
        asked = engine.preview_requests[-1]
        assert asked.messages[-1].thinking is False
        assert asked.branch(asked.candidates[0]).messages[-1].thinking is False
