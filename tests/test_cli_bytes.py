"""`logitscope run` writes byte tokens as the app does (#16.9): the plain reply is the reply's
whole text (a split character once, whole; a stray byte ``\\x9d``; a reply cut after a leading
byte ends in its escape), and each --json token record carries the token's own piece, in the
form the candidates panel shows."""

from __future__ import annotations

import io
import json
from pathlib import Path

from byte_replies import byte_reply

from engine.core.api import SamplingParams
from tui.headless.output import Printer

PARTS: list[str | int] = ["ok", 0x9D, " caf", 0xC3, 0xA9, " then", 0xE4]
WHOLE = "ok\\x9d café then\\xe4"


def _printed(model: Path, as_json: bool) -> str:
    events, done = byte_reply(model, PARTS)
    out = io.StringIO()
    printer = Printer(out, as_json)
    for event in events:
        printer.token(1, event)
    printer.finished(1, done, SamplingParams())
    return out.getvalue()


def test_plain_output_is_the_whole_reply_with_bytes_as_escapes(chatml_model: Path) -> None:
    assert _printed(chatml_model, as_json=False) == WHOLE + "\n"


def test_json_tokens_carry_their_pieces(chatml_model: Path) -> None:
    events, done = byte_reply(chatml_model, PARTS)
    records = [json.loads(line) for line in _printed(chatml_model, as_json=True).splitlines()]
    tokens, turn = records[:-1], records[-1]
    assert [r["piece"] for r in tokens] == [e.piece for e in events]
    assert "\\xc3" in [r["piece"] for r in tokens] and "\\x9d" in [r["piece"] for r in tokens]
    assert [c["text"] for c in tokens[0]["candidates"]] == [c.text for c in events[0].candidates]
    assert turn["text"] == done.text == WHOLE
    assert "\ufffd" not in json.dumps(records, ensure_ascii=False)
