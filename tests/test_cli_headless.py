"""`logitscope run` polish (#16.8): the prompt from stdin, turns told apart, a reply cut by the
length limit said so, a JSON line that reproduces its turn, a help that names the saved settings
and --no-config, and whole-number ranges written as whole numbers."""

from __future__ import annotations

import io
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from engine.core.api import SamplingParams
from tui.headless import main
from engine.scripted import ScriptedEngine

REPLIES = (("Hi", "!", " there"), ("Sure", "."))


class _Factory:
    def __init__(self) -> None:
        self.engines: list[ScriptedEngine] = []

    def __call__(self) -> ScriptedEngine:
        self.engines.append(ScriptedEngine(REPLIES))
        return self.engines[-1]


@pytest.fixture(autouse=True)
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, ScriptedEngine | None]:
    factory = _Factory()
    code = main(["run", "--model", "m", *argv], engine_factory=factory)
    out, err = capsys.readouterr()
    return code, out, err, (factory.engines[0] if factory.engines else None)


class _Stdin(io.StringIO):
    """A stdin with a byte buffer, as a pipe has."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self.buffer = io.BytesIO(data)


def test_prompt_dash_reads_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", _Stdin("a long prompt\nover two lines\n".encode()))
    code, out, _err, engine = _run(["--prompt", "-"], capsys)
    assert code == 0 and engine is not None and out == "Hi! there\n"
    assert engine.requests[0].messages[-1].text == "a long prompt\nover two lines"


@pytest.mark.parametrize("data, argv, expected", [
    (b"", ["--prompt", "-"], "logitscope: --prompt must not be empty\n"),
    (b"\xff\xfe bad", ["--prompt", "-"], "logitscope: --prompt -: stdin is not valid UTF-8 text\n"),
    (b"x", ["--prompt", "-", "--prompt", "-"], "logitscope: --prompt -: stdin can be read only once\n"),
])
def test_prompt_dash_problems_are_one_line(data: bytes, argv: list[str], expected: str,
                                           capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", _Stdin(data))
    code, out, err, engine = _run(argv, capsys)
    assert (code, out, err, engine) == (2, "", expected, None)


def test_plain_output_separates_turns(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, _ = _run(["--prompt", "a", "--prompt", "two\nlines"], capsys)
    assert (code, err) == (0, "")
    assert out == ">>> a\nHi! there\n\n>>> two\n>>> lines\nSure.\n"


def test_a_reply_cut_by_the_length_limit_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, _ = _run(["--prompt", "a", "--max-tokens", "2"], capsys)
    assert (code, out) == (0, "Hi!\n")
    assert err == "logitscope: note: reply 1 was cut at the length limit (2 tokens, --max-tokens)\n"


def test_json_records_the_seed_used_and_the_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err, engine = _run(["--prompt", "a", "--prompt", "b", "--json", "--temp", "0.5"], capsys)
    assert code == 0 and engine is not None
    turns = [record for record in map(json.loads, out.splitlines()) if record["type"] == "turn"]
    for turn, request in zip(turns, engine.requests):
        assert isinstance(turn["seed"], int) and turn["seed"] == request.params.seed  # the one actually used
        assert turn["params"] == asdict(request.params) and turn["params"]["temperature"] == 0.5
    assert SamplingParams(**turns[0]["params"]) == engine.requests[0].params  # enough to run it again


def test_a_given_seed_is_kept_for_every_turn(capsys: pytest.CaptureFixture[str]) -> None:
    _code, out, _err, _ = _run(["--prompt", "a", "--prompt", "b", "--json", "--seed", "7"], capsys)
    assert [r["seed"] for r in map(json.loads, out.splitlines()) if r["type"] == "turn"] == [7, 7]


def test_no_config_ignores_the_saved_settings(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    saved = tmp_path / "config" / "logitscope" / "config.toml"
    saved.parent.mkdir(parents=True)
    saved.write_text("[sampling]\ntemperature = 0.0\n", encoding="utf-8")
    _code, _out, _err, engine = _run(["--prompt", "a"], capsys)
    assert engine is not None and engine.requests[0].params.temperature == 0.0
    _code, _out, _err, engine = _run(["--prompt", "a", "--no-config"], capsys)
    assert engine is not None and engine.requests[0].params.temperature != 0.0


def test_help_names_the_saved_settings_and_whole_ranges(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "saves there with Ctrl+S apply here too" in text and "--no-config ignores the file" in text
    assert "seed (0 to 9223372036854775807;" in text and "top k (0 to 1000000)" in text
    assert "e+" not in text


def test_a_model_without_a_chat_template_is_said_once(capsys: pytest.CaptureFixture[str]) -> None:
    def plain() -> ScriptedEngine:
        return ScriptedEngine(REPLIES, has_chat_template=False)

    code = main(["run", "--model", "base", "--prompt", "a", "--prompt", "b"], engine_factory=plain)
    out, err = capsys.readouterr()
    assert code == 0 and out.count("Hi! there") == 1
    assert err == ("logitscope: note: base has no chat template: plain text (each message after the first "
                   "starts after a blank line)\n")
