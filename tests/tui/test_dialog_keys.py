"""The dialogs' keys are rows of the one bindings table: `[keys]` rebinds them, help lists them,
and a rebinding is checked only against the keys live while that dialog is on top."""

from __future__ import annotations

from typing import Any

from tui.app.bindings import binding_defaults, binding_ids, key_table
from tui.app.keymap import build_keymap
from tui.app.screens.dialogs import TextDialog
from tui.app.screens.library import LibraryScreen


def _keymap(keys: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    return build_keymap(keys, binding_ids(), None, defaults=binding_defaults())


def test_keys_rebind_a_dialog_binding() -> None:
    """Before: `library.rename` was no binding id [keys] knew, so the entry was refused."""
    keymap, problems = _keymap({"library.rename": "ctrl+e", "dialog.accept": "ctrl+enter"})
    assert problems == [] and keymap == {"library.rename": "ctrl+e", "dialog.accept": "ctrl+enter"}


def test_a_dialog_key_may_repeat_a_chat_key_but_not_its_own_or_the_apps() -> None:
    """The library's Ctrl+R (rename) and the chat's Ctrl+R (regenerate) are never live together;
    the library's own Esc, or the app's Ctrl+Q, are."""
    assert _keymap({"library.rename": "f4"})[1] == []  # the chat's "edit last": another screen
    assert _keymap({"library.rename": "escape"})[1] != []  # the library's own Close
    assert _keymap({"library.rename": "ctrl+q"})[1] != []  # the app's Quit, live everywhere


def test_help_lists_the_dialog_keys_and_the_screens_take_them_from_the_table() -> None:
    ids = {row[0] for row in key_table()}
    assert {"library.rename", "dialog.accept", "picker.cancel", "replace.discard", "help.close"} <= ids
    library_ids = {getattr(b, "id", None) for b in LibraryScreen.BINDINGS}
    assert library_ids == {"library.close", "library.down", "library.up", "library.rename", "library.delete",
                           "library.undo", "library.fork"}
    assert {getattr(b, "id", None) for b in TextDialog.BINDINGS} == {"dialog.cancel", "dialog.accept"}


async def test_a_rebound_dialog_key_works_in_the_app(make_app: Any) -> None:
    """The keymap reaches a dialog: with dialog.accept on ctrl+o, Ctrl+O accepts a text dialog."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        app.set_keymap({**app.keymap, "dialog.accept": "ctrl+o"})
        seen: list[str | None] = []
        app.push_screen(TextDialog("System prompt", "be brief"), seen.append)
        await pilot.pause()
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert seen == ["be brief"]
