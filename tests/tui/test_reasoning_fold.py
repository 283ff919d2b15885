"""#30.5 in the app: a reply whose <think> the prompt opened (QwQ, DeepSeek-R1 distills) and a
GPT-OSS harmony reply fold like Qwen3's block; earlier replies' thinking is sent as the template
renders it where the template drops it (the palette switches to the exact cache), its cost said
in the status bar; Ctrl+K in the input edits text, F12 switches thinking."""

from __future__ import annotations

from typing import Any

from textual.widgets import Static

from tui.app.widgets.message_views import AssistantView
from tui.app.widgets.status_bar import StatusBar
from tui.app.widgets.token_chunk import TokenChunk
from tui_helpers import SIZE, palette_run, send, wait_idle, wait_until

from engine.scripted import ScriptedEngine

OPENED_REPLY = ("hmm", " the cat", "\n</think>", "\n\n", "Paris", " is", " big", ".")
HARMONY_REPLY = ("<|channel|>", "analysis", "<|message|>", "hmm", ".", "<|end|>", "<|start|>", "assistant",
                 "<|channel|>", "final", "<|message|>", "Paris", ".")
QWEN_REPLY = ("<think>", "\nhmm", "\n</think>", "\n\n", "Paris", ".")


def _view(app: Any) -> AssistantView:
    return list(app.screen.query(AssistantView))[-1]


def _shown(view: AssistantView) -> str:
    return "".join(str(c.render()) for c in view.query(TokenChunk))


async def test_a_block_the_prompt_opened_folds_while_streaming_and_after(make_app: Any) -> None:
    engine = ScriptedEngine([OPENED_REPLY], token_delay=0.4, opens_thinking=True)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        app.screen.query_one("ChatInput").focus()
        await pilot.press("h", "i", "enter")
        await wait_until(pilot, lambda: len(app.controller.conversation.path()) == 2
                         and len(app.controller.conversation.path()[-1].version.tokens or ()) >= 1)
        view = _view(app)
        assert "still thinking" in str(view.query_one("#thinking", Static).render())
        assert "hmm" not in _shown(view)
        await wait_idle(app, pilot)
        assert "thinking… 4 tokens" in str(view.query_one("#thinking", Static).render())
        assert "hmm" not in _shown(view) and "Paris" in _shown(view)


async def test_a_harmony_reply_folds_its_analysis_channel(make_app: Any) -> None:
    app = make_app(ScriptedEngine([HARMONY_REPLY]))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        view = _view(app)
        assert "thinking… 11 tokens" in str(view.query_one("#thinking", Static).render())
        assert "hmm" not in _shown(view) and "Paris" in _shown(view)


async def test_ctrl_k_edits_the_input_and_f12_switches_thinking(make_app: Any) -> None:
    app = make_app(ScriptedEngine(supports_thinking=True))
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        box = app.screen.query_one("ChatInput")
        box.focus()
        await pilot.press(*"hello world", "home", "ctrl+k")
        await pilot.pause()
        assert box.text == "" and app.controller.thinking is None  # deleted to the line's end
        await pilot.press("f12")
        await pilot.pause()
        assert app.controller.thinking is False


async def test_past_thinking_follows_the_template_and_the_palette_switches_it(make_app: Any) -> None:
    engine = ScriptedEngine([QWEN_REPLY], supports_thinking=True, drops_past_thinking=True)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        bar = app.screen.query_one(StatusBar)
        assert bar.past_thinking == "past think dropped (re-read 2, -4 ctx)"
        assert "past think dropped" in bar.render().plain
        await send(app, pilot, "more")
        sent = engine.requests[-1].messages
        assert sent[1].role == "assistant" and sent[1].token_ids is None  # as the template renders it
        await palette_run(pilot, "Past thinking")
        assert bar.past_thinking.startswith("past think kept (+8 ctx)")
        await send(app, pilot, "again")
        assert all(m.token_ids is not None for m in engine.requests[-1].messages if m.role == "assistant")
