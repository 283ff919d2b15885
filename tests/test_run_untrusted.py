"""`logitscope run` never writes a terminal escape it did not make: token text from a crafted
tokenizer, and error lines quoting a model name, come out with their control characters visible.
The --json output was already safe (JSON escapes them) and must stay byte-for-byte as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from crafted import escaping_tokenizer

from tui.headless import main
from engine.scripted import ScriptedEngine
from engine.core.settings import printable

ESCAPES = ("\x1b]52;c;aGk=\x07", "\x1b]0;TITLE\x07", "\x1b[2J", "\x1b", "\r", "\x9b2J")
SHOWN = "␛]52;c;aGk=␇␛]0;TITLE␇␛[2J␛␍\\x9b2J"


@pytest.fixture(autouse=True)
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def _raw_controls(text: str) -> list[str]:
    return [hex(ord(ch)) for ch in text if (ord(ch) < 0x20 and ch not in "\n\t") or 0x7F <= ord(ch) < 0xA0]


def test_plain_output_makes_token_escapes_visible(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--model", "m", "--prompt", "a"], engine_factory=lambda: ScriptedEngine([ESCAPES + ("\tok",)]))
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert _raw_controls(out) == [] and out == SHOWN + "\tok\n"


def test_json_output_keeps_the_exact_text(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--model", "m", "--prompt", "a", "--json"], engine_factory=lambda: ScriptedEngine([ESCAPES]))
    out, _err = capsys.readouterr()
    assert code == 0 and _raw_controls(out) == []
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["text"] for r in records if r["type"] == "token"] == list(ESCAPES)


def test_an_error_line_quoting_a_model_name(capsys: pytest.CaptureFixture[str]) -> None:
    spec = "x\x1b]0;TITLE\x07"
    code = main(["run", "--model", spec, "--prompt", "a"],
                engine_factory=lambda: ScriptedEngine(load_error=f"model folder not found: {spec}"))
    _out, err = capsys.readouterr()
    assert code == 2 and err == "logitscope: model folder not found: x␛]0;TITLE␇\n"


@pytest.fixture
def escaping_model(chatml_model: Path, tmp_path: Path) -> Path:
    return escaping_tokenizer(chatml_model, tmp_path / "escaping")


@pytest.mark.slow
def test_a_real_model_with_a_crafted_tokenizer(escaping_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--model", str(escaping_model), "--prompt", "hello there", "--max-tokens", "24",
            "--temp", "0"]
    assert main([*argv, "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    said = "".join(r["text"] for r in records if r["type"] == "token")
    assert "\x1b" in said  # the crafted tokenizer does put escapes in the reply
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert _raw_controls(out) == [] and out == printable(said) + "\n" and "␛" in out
