"""`run --logit-bias TOKEN=BIAS` with the token's text as well as its id (#32.4): a text is split by
the loaded model's tokenizer and must be one token; a phrase of several tokens is refused in one
line (no banned strings: the decode loop does not backtrack), before any turn runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.scripted import ScriptedEngine
from tui.headless import main
from tui.headless.bias import split_bias_flags

REPLIES = (("Hi", "!", " there"),)


@pytest.fixture(autouse=True)
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, ScriptedEngine]:
    engines: list[ScriptedEngine] = []

    def factory() -> ScriptedEngine:
        engines.append(ScriptedEngine(REPLIES))
        return engines[-1]
    code = main(["run", "--model", "m", "--prompt", "hello", *argv], engine_factory=factory)
    _out, err = capsys.readouterr()
    return code, err, engines[0]


def test_a_bias_names_its_token_by_text_or_id(capsys: pytest.CaptureFixture[str]) -> None:
    code, err, engine = _run(["--logit-bias", "!=ban", "--logit-bias", "7=1.5", "--logit-bias", " there=-3"], capsys)
    assert code == 0, err
    ids = {text: engine._vocab.id_of(text) for text in ("!", " there")}
    biases = dict(engine.requests[0].params.logit_bias)
    assert biases == {ids["!"]: -100.0, 7: 1.5, ids[" there"]: -3.0}


def test_a_phrase_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, err, engine = _run(["--logit-bias", "good morning=ban"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "is 2 tokens for this model" in err and "banning a phrase is not supported" in err
    assert engine.requests == []  # refused before any turn


def test_flag_values_split_at_commas_only_for_ids() -> None:
    assert split_bias_flags(["1=2,3=ban"]) == (["1=2,3=ban"], [])
    assert split_bias_flags(["a,b=2", "x=y=ban", "\\n=-1"]) == ([], [("a,b", 2.0), ("x=y", -100.0), ("\n", -1.0)])
    for bad in ("nothing", "=3", "a=lots", "a=500"):
        with pytest.raises(ValueError):
            split_bias_flags([bad])
