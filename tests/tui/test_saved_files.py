"""Saved conversation files are data to check, not to trust: a bad file is refused whole, in one
line, before the live chat is touched; no chat is too long to save; older files still open."""

from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from engine.core import strictjson
from engine.core.api import Candidate, SamplingParams, TokenEvent
from engine.core.chat import store
from engine.scripted import ScriptedEngine
from engine.core.chat.conversation import Conversation, Node, Version
from engine.core.chat.fileformat import conversation_from_dict, conversation_to_dict
from engine.core.chat.store import load_conversation, save_conversation
from tui_helpers import SIZE, send, wait_idle, wait_until


def _token(i: int, text: str) -> TokenEvent:
    cands = (Candidate(10 + i, text, math.log(0.5), 0.6), Candidate(99, " alt", math.log(0.2), 0.0))
    return TokenEvent(i, 10 + i, text, text, math.log(0.5), 0.6, 1, 1.2, cands)


def _long_chat(exchanges: int) -> Conversation:
    conv = Conversation("sys")
    for n in range(exchanges):
        conv.append(Node("user", [Version(f"q{n}")]))
        conv.append(Node("assistant", [Version(f"a{n}", [_token(0, f"a{n}")], SamplingParams(), "stop")]))
    return conv


def _good() -> dict[str, Any]:
    conv = _long_chat(2)
    conv.path()[1].add_version(Version("b", [_token(0, "b")], finish_reason="stop", branched_at=0))
    return conversation_to_dict(conv)


def test_a_long_chat_saves_and_reads_back(tmp_path: Path) -> None:
    """332 messages raised RecursionError at quit (every message since the last quit lost)."""
    conv = _long_chat(1000)
    path = tmp_path / "c.json"
    save_conversation(conv, path)
    again = load_conversation(path)
    assert len(again.path()) == 2000
    assert again.path()[-1].version.reply_text() == "a999"
    assert conversation_to_dict(again) == conversation_to_dict(conv)


def test_branches_survive_the_flat_format(tmp_path: Path) -> None:
    data = _good()
    again = conversation_from_dict(json.loads(json.dumps(data)))
    assert conversation_to_dict(again) == data
    reply = again.path()[1]
    assert reply.active == 1 and len(again.path()) == 2  # the new branch has no follow-up yet
    reply.flip(-1)
    assert len(again.path()) == 4


def _nodes(data: dict[str, Any]) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = data["nodes"]
    return nodes


BAD_FILES: list[tuple[str, Any, str]] = [
    ("not an object", lambda d: [1, 2], "file: expected an object"),
    ("unknown format", lambda d: {**d, "format": 9}, "format: unknown version 9"),
    ("system prompt a number", lambda d: {**d, "system_prompt": 3}, "system_prompt: expected text"),
    ("versions not a list", lambda d: _set(d, 0, "versions", "x"), "nodes[0].versions: expected a list"),
    ("empty versions", lambda d: _set(d, 0, "versions", []), "nodes[0].versions: a message needs at least one"),
    ("active out of range", lambda d: _set(d, 1, "active", 5), "nodes[1].active: 5 is not a version"),
    ("active negative", lambda d: _set(d, 1, "active", -1), "nodes[1].active: -1 is not a version"),
    ("active a bool", lambda d: _set(d, 1, "active", True), "nodes[1].active: expected a whole number"),
    ("text not a string", lambda d: _version(d, 0, "text", 42), "nodes[0].versions[0].text: expected text"),
    ("null token text", lambda d: _token_field(d, "text", None), "tokens[0].text: expected text"),
    ("token id negative", lambda d: _token_field(d, "id", -3), "tokens[0].id: -3 is not a token id"),
    ("token id huge", lambda d: _token_field(d, "id", 2**31), "is not a token id"),
    ("unknown role", lambda d: _set(d, 0, "role", "robot"), "nodes[0].role: expected one of"),
    ("bad params", lambda d: _version(d, 1, "params", {"temperature": "hot"}), "temperature must be a number"),
    ("bad finish", lambda d: _version(d, 1, "finish_reason", "boom"), "finish_reason: unknown reason"),
    ("two roots", lambda d: _set(d, 1, "parent", None), "nodes[1].parent: only the first message"),
    ("parent ahead", lambda d: _set(d, 1, "parent", [3, 0]), "nodes[1].parent: 3 is not an earlier"),
    ("parent slot", lambda d: _set(d, 1, "parent", [0, 7]), "nodes[1].parent: message 0 has no version 7"),
]


def _set(data: dict[str, Any], node: int, key: str, value: Any) -> dict[str, Any]:
    _nodes(data)[node][key] = value
    return data


def _version(data: dict[str, Any], node: int, key: str, value: Any) -> dict[str, Any]:
    _nodes(data)[node]["versions"][0][key] = value
    return data


def _token_field(data: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    _nodes(data)[1]["versions"][0]["tokens"][0][key] = value
    return data


@pytest.mark.parametrize("name,break_it,problem", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_file_is_one_line_naming_the_first_problem(tmp_path: Path, name: str, break_it: Any,
                                                         problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(break_it(_good())), encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        load_conversation(path)
    assert problem in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("text", ["[" * 100_000, '{"root": ' * 50_000 + "1"], ids=["lists", "objects"])
def test_nesting_deeper_than_the_recursion_limit_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "deep.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="nested too deeply|not JSON"):
        load_conversation(path)


def _v1(exchanges: int, finish: str | None = "stop") -> dict[str, Any]:
    """The nested format 1 that earlier versions wrote (each message inside the previous one)."""
    root: dict[str, Any] | None = None
    for n in reversed(range(exchanges)):
        reply = {"text": f"a{n}", "tokens": [{**_token(0, f"a{n}").__dict__, "candidates": []}],
                 "params": None, "finish_reason": finish, "branched_at": None, "stats": None,
                 "child": root, "model": "/m"}
        assistant = {"role": "assistant", "active": 0, "versions": [reply]}
        root = {"role": "user", "active": 0, "versions": [{"text": f"q{n}", "tokens": None, "child": assistant}]}
    return {"format": 1, "system_prompt": "old", "root": root}


def test_files_from_the_previous_version_still_open(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps(_v1(150)), encoding="utf-8")
    conv = load_conversation(path)
    assert conv.system_prompt == "old" and len(conv.path()) == 300
    assert conv.path()[1].version.model == "/m" and conv.path()[-1].version.reply_text() == "a149"


def test_a_reply_saved_mid_stream_opens_as_cancelled(tmp_path: Path) -> None:
    """Older versions saved a reply cut by quitting with finish_reason null: "streaming..." forever."""
    path = tmp_path / "old.json"
    path.write_text(json.dumps(_v1(1, finish=None)), encoding="utf-8")
    assert load_conversation(path).path()[1].version.finish_reason == "cancelled"


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        load_conversation(fifo)


def test_a_full_disk_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state" / "c.json"
    save_conversation(_long_chat(1), path)

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store, "write_text", full)
    with pytest.raises(OSError):
        save_conversation(_long_chat(2), path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["c.json"]
    assert len(load_conversation(path).path()) == 2  # the previous save is intact


def _notes(app: Any) -> list[str]:
    return [n.message for n in app._notifications]


@pytest.mark.parametrize("content", [
    json.dumps(_set(_good(), 1, "active", 9)),
    json.dumps(_token_field(_good(), "text", None)),
    "[" * 100_000,
], ids=["active", "null-text", "deep"])
async def test_a_bad_chat_file_at_start_is_one_line_and_kept(make_app: Any, tmp_path: Path, content: str) -> None:
    """A chat file the start would take into the library (an older version's resume file) that
    the reader refuses: one line naming it, the file kept unchanged in the backup folder, nothing
    in the library, and the live chat untouched by Ctrl+L."""
    app = make_app(ScriptedEngine())
    path = tmp_path / "state" / "last-conversation.json"
    path.parent.mkdir(parents=True)
    path.write_text(content, encoding="utf-8")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: any("could not be read as a chat" in n for n in _notes(app)))
        await send(app, pilot, "keep me")
        live = app.controller.conversation
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: any("No other chat" in n for n in _notes(app)))
        await wait_idle(app, pilot)
        assert app.controller.conversation is live and live.path()[0].version.text == "keep me"
        note = next(n for n in _notes(app) if "could not be read as a chat" in n)
        assert "\n" not in note and "last-conversation.json" in note
    assert (tmp_path / "state" / "imported-into-library" / "last-conversation.json").read_text() == content


def test_a_full_disk_leaves_no_recent_models_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.models import record_recent

    def full(self: Path, target: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    record_recent("demo", tmp_path)
    monkeypatch.setattr(Path, "replace", full)
    record_recent("/some/model", tmp_path)  # best effort: never raises
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recent.json"]
