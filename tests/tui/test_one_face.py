"""One reply, one face (#16.9): the reply reads the same however it is looked at.

A finished reply is laid out exactly as the token view lays it out (the model's text, Markdown
highlighted in place, markers kept), so the token cursor entering it, moving in it, or the
heatmap changes colours only, never which character sits in which cell. Byte tokens read the
same in the reply, the candidates panel and `logitscope run`: a split character whole in the
reply, each token's own bytes (``\\xc3``) in the panel, a byte of no character ``\\x9d`` in both.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from byte_replies import byte_reply
from tui_helpers import screen_text, send, wait_idle, store_chat, wait_until, wait_scored

from engine.core.api import EngineEvent, GenerateRequest, SamplingParams, TokenEvent, TurnFinished
from engine.scripted import ScriptedEngine, ScriptedToken
from engine.core.chat.conversation import Conversation, Node, Version
from tui.app.widgets.message_views import AssistantView
from tui.app.widgets.render import visible

MARKDOWN = [
    "# Title", "\n\n", "Some ", "**", "bold", "**", " and ", "*", "italic", "*", " words", " with", " `", "code",
    "`", " in", " a", " line", " long", " enough", " to", " wrap", " at", " eighty", " columns", " and", " more",
    ".", "\n\n", "- one", "\n", "- **two**", "\n", "1.", " first", "\n\n", "> quoted", "\n\n", "```", "python",
    "\n", "x", " =", " 1", "  #", " *not*", " emphasis", "\n", "```", "\n\n", "## Sub", "\n", "end", ".",
]


def _reply_lines(app: Any) -> list[str]:
    """The last reply's rows as the screen shows them (its border and padding included)."""
    view = app.screen.query(AssistantView).last()
    region = view.region
    rows = screen_text(app).splitlines()
    return [rows[y][region.x:region.right].rstrip() if y < len(rows) else "" for y in range(region.y, region.bottom)]


async def _walk(app: Any, pilot: Any, count: int) -> list[tuple[list[str], str]]:
    """The reply's rows and the candidates panel's token line with the cursor on each of the
    reply's `count` tokens, first to last."""
    await pilot.press("escape", "home")
    seen = []
    for step in range(count):
        await pilot.pause()
        seen.append((_reply_lines(app), _panel_token(app)))
        if step + 1 < count:
            await pilot.press("right")
    return seen


def _panel_token(app: Any) -> str:
    """The candidates panel's first line: ``#index token``."""
    line = next(row for row in screen_text(app).splitlines() if "│ #" in row)
    return line.split("│ #", 1)[1].split("│")[0].rstrip()


@pytest.mark.parametrize("size", [(80, 44), (160, 50)])
async def test_the_cursor_entering_a_reply_changes_colours_not_layout(make_app: Any, size: tuple[int, int]) -> None:
    app = make_app(ScriptedEngine([[ScriptedToken(t, 0.5, (("x", 0.2),)) for t in MARKDOWN]]))
    async with app.run_test(size=size) as pilot:
        await send(app, pilot, "hi")
        await wait_scored(app, pilot)  # the header's perplexity is in before the picture is taken
        before = _reply_lines(app)
        shown = "\n".join(before)
        assert "# Title" in shown and "**bold**" in shown and "- one" in shown and "```python" in shown
        for token, (lines, _panel) in zip(MARKDOWN, await _walk(app, pilot, len(MARKDOWN))):
            if token.strip():
                assert lines == before
            else:  # a blank token that ends a line: a ↵ drawn in the free cell after the line
                assert [line.removesuffix("↵") for line in lines] == before
                assert sum(line.endswith("↵") for line in lines) == ("\n" in token)
        await pilot.press("f3")  # the heatmap: colours again
        await pilot.pause()
        assert _reply_lines(app) == before


class _Replay(ScriptedEngine):
    """Sends prepared events and the turn's text as the real engine made them."""

    def __init__(self, events: list[TokenEvent], done: TurnFinished) -> None:
        super().__init__([[event.text or "·" for event in events]])
        self.events, self.done = events, done

    def _event(self, index: int, token: ScriptedToken, params: SamplingParams) -> TokenEvent:
        return self.events[index]

    async def _generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """The stop token comes a while after the last shown one (so that one is laid out first)."""
        async for event in super()._generate(request):
            if isinstance(event, TurnFinished):
                await asyncio.sleep(0.2)
            yield event

    def _finished(self, request: GenerateRequest, prompt_ids: list[int], reused: int, ids: list[int],
                  text: str, reason: str, generated: int) -> TurnFinished:
        return replace(super()._finished(request, prompt_ids, reused, ids, text, reason, generated),
                       text=self.done.text, token_ids=self.done.token_ids)


async def test_byte_tokens_read_the_same_in_the_reply_and_the_panel(make_app: Any, chatml_model: Path) -> None:
    events, done = byte_reply(chatml_model, ["The caf", 0xC3, 0xA9, " is", 0x9D, " ok", 0xE4])
    assert done.text == "The café is\\x9d ok\\xe4"
    app = make_app(_Replay(events, done))
    async with app.run_test(size=(100, 40)) as pilot:
        await send(app, pilot, "hi")
        await wait_scored(app, pilot)
        before = _reply_lines(app)
        assert before[1].strip(" ▌▊█") == done.text  # the whole character, the bytes as the panel writes them
        for event, (lines, panel) in zip(events, await _walk(app, pilot, len(events))):
            assert lines == before
            assert panel == f"{event.index} {visible(event.piece)}"
        assert "\ufffd" not in screen_text(app)
        view = app.screen.query(AssistantView).last()
        first_byte = next(e.index for e in events if e.piece == "\\xc3")
        view.set_cursor(first_byte)  # a token that adds no text lights the character it is part of
        await pilot.pause()
        chunk = view._chunks[0]
        lit = [seg.text for y in range(chunk.size.height) for seg in chunk.render_line(y) if seg.style and seg.style.reverse]
        assert lit == ["é"]


async def test_a_reply_saved_without_tokens_shows_its_text(make_app: Any, tmp_path: Path) -> None:
    """A file may hold a reply's text without its tokens: it shows, highlighted the same way."""
    conversation = Conversation()
    conversation.append(Node("user", [Version("hi")]))
    conversation.append(Node("assistant", [Version("- one **two** [b]x[/b]", finish_reason="stop")]))
    app = make_app()
    store_chat(app.library.path, conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_idle(app, pilot)
        app.chat_screen.action_resume_last()
        await wait_until(pilot, lambda: "- one **two** [b]x[/b]" in screen_text(app), timeout=30)
