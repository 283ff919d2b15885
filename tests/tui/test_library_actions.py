"""Copy a token (y) or a message (Y) to the clipboard, and export the chat (palette) as Markdown
or as JSON that reads back whole."""

from __future__ import annotations

import json

from conftest import AppFactory
from tui_helpers import SIZE, palette_run, send, wait_until

from engine.core.settings import data_dir
from tui.app.library_actions import EXPORT_FOLDER
from engine.core.chat.fileformat import conversation_from_dict, conversation_to_dict


async def test_copy_the_selected_token_and_the_message(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        reply = app.controller.conversation.path()[1].version
        await pilot.press("escape", "home", "right")
        await pilot.pause()
        await pilot.press("y")
        await wait_until(pilot, lambda: app.clipboard == reply.tokens[1].text)
        await pilot.press("Y")
        await wait_until(pilot, lambda: app.clipboard == reply.reply_text())


async def test_export_markdown_and_json(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "Tell me")
        await palette_run(pilot, "Export chat as Markdown")
        await palette_run(pilot, "Export chat as JSON")
        folder = data_dir() / EXPORT_FOLDER
        await wait_until(pilot, lambda: len(list(folder.glob("*"))) == 2)
        md = next(folder.glob("*.md")).read_text()
        assert md.startswith("# Tell me") and "## Assistant" in md
        data = json.loads(next(folder.glob("*.json")).read_text())
        assert data["title"] == "Tell me"
        live = conversation_to_dict(app.controller.conversation)
        assert conversation_to_dict(conversation_from_dict(data)) == live


CODE_REPLY = ["Here:", "\n", "```python", "\n", "print(1)", "\n", "x = 2", "\n", "```", "\n", "and", "\n",
              "```", "\n", "ls", "\n", "```"]


async def test_b_copies_a_fenced_code_block(make_app: AppFactory) -> None:
    """#30.6: one key copies a code block's code (the fences and the prose left out)."""
    from engine.scripted import ScriptedEngine

    app = make_app(ScriptedEngine([CODE_REPLY]))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "code please")
        await pilot.press("escape", "b")  # no token selected: the reply's last block
        await wait_until(pilot, lambda: app.clipboard == "ls")
        await pilot.press("home", "right", "right", "right", "right")  # "print(1)"
        await pilot.press("b")
        await wait_until(pilot, lambda: app.clipboard == "print(1)\nx = 2")


def test_code_blocks_are_found_by_their_fences() -> None:
    from engine.core.chat.code_blocks import code_blocks

    text = "a\n```py\none\ntwo\n```\nb\n~~~~\nthree\n~~~~\n```\nunclosed"
    blocks = [(text[b.start:b.end], b.language) for b in code_blocks(text)]
    assert blocks == [("one\ntwo", "py"), ("three", ""), ("unclosed", "")]
