"""Snapshot tests of the main screen (pytest-textual-snapshot). Deterministic: the scripted engine
with no token delay, a fixed terminal size, and the reply finished before the picture is taken.

Update after an intended visual change with ``pytest tests/tui/test_snapshots.py --snapshot-update``
and look at the SVGs in the report before committing them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from textual.widgets import Input

from engine.models import hub
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.user_view import UserView
from tui_helpers import SIZE, send, wait_idle, wait_until


@pytest.fixture(autouse=True)
def _fixed_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A "random" seed is drawn per turn and shown on the reply: a fixed one keeps the picture fixed."""
    monkeypatch.setattr("tui.app.controller.draw_seed", lambda: 1234)


# The what-if previews are asked once the cursor rests: with the default 300 ms the picture had
# them or not depending on how busy the machine was. Asked later than any picture is taken.
NO_PREVIEWS_YET = "[preview]\ndelay_ms = 10000\n"


async def _chat(pilot: Any) -> None:
    # A blinking caret would make the picture depend on when it is taken.
    pilot.app.screen.query_one(ChatInput).cursor_blink = False
    await send(pilot.app, pilot, "hi")
    # the question scored (#33.1): its tokens and perplexity are in the picture, not on their way
    await wait_until(pilot, lambda: all(view.tokens for view in pilot.app.screen.query(UserView)))
    await pilot.pause()


def test_main_screen_after_a_reply(snap_compare: Any, make_app: Any) -> None:
    """You should see: the user's "hi", the finished reply as the model wrote it with its Markdown
    highlighted in place ("- I show **candidates**": the "-" bullets bold in the theme's colour,
    "candidates" bold, the "**" kept and dimmed; no blank line after it), the candidates panel showing the newest token "." (p raw 90.0%,
    sampled 100.0%, rank 1), the parameters panel (temperature 0.70, top-p 1.00 (off), ...), the status bar
    ("scripted-demo  float32 · scripted  ready  ctx 22/4096 ...") and the footer keys."""
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=_chat)


def test_inspecting_a_token_with_heatmap(snap_compare: Any, make_app: Any) -> None:
    """You should see: the reply as tokens coloured by probability (heatmap on: five bands, most
    tokens in the >=50% green, " branches" in the <50% band), the cursor on " scripted" (reverse
    video), the legend line "heat: p raw  <0.1%  <1%  <10%  <50%  ≥50%  F3: by entropy" above the
    input, and the candidates panel for it: rank 4, " small", " tiny", " demo" above the chosen
    " scripted" with its ▶ marker."""

    async def inspect(pilot: Any) -> None:
        await _chat(pilot)
        await pilot.press("f3", "escape", "right", "home", "n")
        await pilot.pause()

    assert snap_compare(make_app(config_text=NO_PREVIEWS_YET), terminal_size=SIZE, run_before=inspect)


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (60, 20), (160, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_inspecting_at_any_size(snap_compare: Any, make_app: Any, size: tuple[int, int]) -> None:
    """You should see, as above (cursor on " scripted", heatmap and its legend on): at 100x30 and
    160x50 the panels in a column beside the chat; at 80x24 the chat full width with the
    candidates (numbers and four rows) and the parameters side by side under it; at 60x20 only
    the candidates under the chat. No word of a header or the legend cut."""

    async def inspect(pilot: Any) -> None:
        await _chat(pilot)
        await pilot.press("f3", "escape", "right", "home", "n")
        await pilot.pause()

    assert snap_compare(make_app(config_text=NO_PREVIEWS_YET), terminal_size=size, run_before=inspect)


def test_help_screen(snap_compare: Any, make_app: Any) -> None:
    """You should see: the help table listing keys, actions, where they act and binding ids,
    starting with "ctrl+q  Quit  anywhere  app.quit"."""

    async def help_(pilot: Any) -> None:
        await wait_idle(pilot.app, pilot)
        await pilot.press("f1")
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=help_)


def test_model_picker(snap_compare: Any, make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """You should see: the "Switch model" dialog over the chat, with the filter input and three
    rows: "demo  built-in  (loaded)" highlighted, "someone/recent-model  recent · not
    downloaded", and "org/cached-model  HF cache · 1.5 GB"."""
    cached = hub.ModelEntry("org/cached-model", "org/cached-model", "cache", "/hf/cached", 1_500_000_000)
    monkeypatch.setattr(hub, "cached_models", lambda cache_dir=None: [cached])
    hub.record_recent("someone/recent-model")

    async def pick(pilot: Any) -> None:
        await wait_idle(pilot.app, pilot)
        await pilot.press("ctrl+o")
        for _ in range(500):
            if getattr(pilot.app.screen, "entries", None) is not None:
                break
            await asyncio.sleep(0.01)
        for field in pilot.app.screen.query(Input):
            field.cursor_blink = False  # a blinking caret would make the picture depend on timing
        await pilot.pause()
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=pick)
