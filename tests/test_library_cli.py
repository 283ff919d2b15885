"""The library from a shell: `run --save` stores a chat the app's reader opens (every token and
candidate), `run --continue ID` continues it with its replies as their exact ids, and `export` /
`import` move chats out and back. Every failure is one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tui.headless import main
from engine.core.library import Library
from tui.main import main as logitscope
from engine.core.chat.fileformat import conversation_from_dict


def _records(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_run_save_then_continue_through_the_apps_reader(chatml_model: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--no-config", "--model", str(chatml_model), "--max-tokens", "6", "--candidates", "4",
            "--temp", "0.8", "--json"]
    assert main([*argv, "--system", "be short", "--prompt", "hello", "--save"]) == 0
    records = _records(capsys.readouterr().out)
    assert records[-1]["type"] == "saved"
    stored = Library().load(records[-1]["id"])
    chat = conversation_from_dict(stored.document)  # the TUI's own checked reader
    reply = chat.path()[1].version
    tokens = [r for r in records if r["type"] == "token"]
    turn = next(r for r in records if r["type"] == "turn")
    assert chat.system_prompt == "be short" and chat.path()[0].version.text == "hello"
    assert reply.token_ids == tuple(t["id"] for t in tokens) and reply.model == str(chatml_model)
    assert [c.id for c in reply.tokens[0].candidates] == [c["id"] for c in tokens[0]["candidates"]]
    assert reply.params is not None and reply.params.seed == turn["seed"] and reply.stats is not None
    assert stored.entry.title == "hello" and stored.entry.model_spec == str(chatml_model)

    assert main([*argv, "--prompt", "more", "--continue", records[-1]["id"][:8]]) == 0
    again = _records(capsys.readouterr().out)
    prompt = next(r for r in again if r["type"] == "turn")["prompt_ids"]
    ids = list(reply.token_ids)
    assert any(prompt[i:i + len(ids)] == ids for i in range(len(prompt)))  # the reply went in as its ids
    assert again[-1] == {"type": "saved", "id": records[-1]["id"]}
    assert len(conversation_from_dict(Library().load(records[-1]["id"]).document).path()) == 4


def test_plain_save_says_the_id_and_a_bad_continue_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.scripted import ScriptedEngine

    assert main(["run", "--no-config", "--model", "m", "--prompt", "hi", "--save"], engine_factory=ScriptedEngine) == 0
    err = capsys.readouterr().err
    [entry] = Library().entries()
    assert f"logitscope: saved as {entry.id}\n" in err
    assert main(["run", "--no-config", "--model", "m", "--prompt", "hi", "--continue", "nope"],
                engine_factory=ScriptedEngine) == 2
    assert capsys.readouterr().err == "logitscope: no chat 'nope' in the library\n"


def test_export_and_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from engine.scripted import ScriptedEngine

    main(["run", "--no-config", "--model", "m", "--prompt", "line one\x1b[31m", "--save"], engine_factory=ScriptedEngine)
    [entry] = Library().entries()
    capsys.readouterr()
    assert logitscope(["export", entry.id, "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert "## User" in md and "## Assistant" in md and "\x1b" not in md  # data, never terminal control
    assert logitscope(["export", entry.id, "--format", "json"]) == 0
    exported = tmp_path / "chat.json"
    exported.write_text(capsys.readouterr().out)
    assert logitscope(["import", str(exported)]) == 0
    new_id = capsys.readouterr().out.strip()
    assert Library().load(new_id).document == Library().load(entry.id).document
    exported.write_text('{"format": 2, "nodes": [{"role": "robot"}]}')
    assert logitscope(["import", str(exported)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("logitscope: cannot import") and err.count("\n") == 1
    assert logitscope(["list", "line"]) == 0 and entry.id in capsys.readouterr().out
