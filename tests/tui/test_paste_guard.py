"""A bracketed paste holding ESC stays one paste (`tui.app.paste_guard`): Textual's parser alone
split it, left the text after the ESC out of the paste and sent it as key presses (its BEL as
Ctrl+G). Through the guard, the paste is whole and in order, its ESCs shown as ␛, no key among
the events; outside a paste nothing changes (Escape still arrives at once)."""

from __future__ import annotations

from typing import Any

import pytest
from textual import events
from textual._xterm_parser import XTermParser

from tui.app.paste_guard import PasteGuard, PasteSafeParser, paste_safe_driver

START, END = "\x1b[200~", "\x1b[201~"
HOSTILE = "log: \x1b[31mred\x1b[0m done\x07 tail"


def parse(parser: XTermParser, *reads: str) -> list[Any]:
    seen: list[Any] = []
    for data in reads:
        seen.extend(parser.feed(data))
    seen.extend(parser.feed(""))
    return seen


def test_textual_alone_breaks_such_a_paste() -> None:
    """The bug this guards against (if Textual fixes it, the guard can go)."""
    seen = parse(XTermParser(), START + HOSTILE + END)
    pastes = [e.text for e in seen if isinstance(e, events.Paste)]
    assert pastes != [HOSTILE.replace("\x1b", "␛")]
    assert any(isinstance(e, events.Key) for e in seen)


@pytest.mark.parametrize("split", [None, 1, 3, 5, 7, 9, 14, 30, 35, 39])
def test_the_paste_arrives_whole_in_order_and_no_key(split: int | None) -> None:
    data = START + HOSTILE + END
    reads = (data,) if split is None else (data[:split], data[split:])
    seen = parse(PasteSafeParser(), *reads)
    assert [e.text for e in seen if isinstance(e, events.Paste)] == [HOSTILE.replace("\x1b", "␛")]
    assert not [e for e in seen if isinstance(e, events.Key)]


def test_a_paste_read_a_character_at_a_time() -> None:
    data = "a" + START + HOSTILE + END + "b"
    seen = parse(PasteSafeParser(), *data)
    assert [e.text for e in seen if isinstance(e, events.Paste)] == [HOSTILE.replace("\x1b", "␛")]
    assert [e.character for e in seen if isinstance(e, events.Key)] == ["a", "b"]


def test_keys_outside_a_paste_are_as_textual_reads_them() -> None:
    keys = "x\x1b[Ay\x07"  # x, Up, y, Ctrl+G
    ours = [e.key for e in parse(PasteSafeParser(), keys) if isinstance(e, events.Key)]
    theirs = [e.key for e in parse(XTermParser(), keys) if isinstance(e, events.Key)]
    assert ours == theirs == ["x", "up", "y", "ctrl+g"]


def test_an_escape_key_is_never_held_back() -> None:
    guard = PasteGuard()
    assert guard("\x1b") == "\x1b" and guard.held() == ""
    assert guard("[20") == "[20" and not guard.in_paste
    assert guard("0~") == "0~" and guard.in_paste  # a start split across reads is still found


def test_two_pastes_and_an_end_split_inside_a_paste() -> None:
    guard = PasteGuard()
    out = guard(START + "a\x1b") + guard("b" + END[:3]) + guard(END[3:] + "k" + START + "\x1b" + END)
    assert out == START + "a␛b" + END + "k" + START + "␛" + END and not guard.in_paste


def test_the_apps_driver_parses_through_the_guard() -> None:
    from textual.drivers.linux_driver import LinuxDriver

    driver = paste_safe_driver(LinuxDriver)
    assert issubclass(driver, LinuxDriver) and driver is not LinuxDriver
    assert driver.run_input_thread.__globals__["XTermParser"] is PasteSafeParser
    assert driver.run_input_thread.__code__ is LinuxDriver.run_input_thread.__code__  # Textual's own loop
    from textual.drivers.headless_driver import HeadlessDriver

    assert paste_safe_driver(HeadlessDriver) is HeadlessDriver


def test_the_app_asks_for_that_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.app import App

    from tui.app.application import LogitscopeApp

    monkeypatch.setattr("textual.constants.DRIVER", None)
    made = LogitscopeApp.get_driver_class(App.__new__(LogitscopeApp))
    assert made.run_input_thread.__globals__["XTermParser"] is PasteSafeParser
