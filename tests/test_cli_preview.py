"""``logitscope run --json --preview K:N``: every token line lists where its top K candidates lead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui.headless import main


@pytest.fixture(autouse=True)
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def test_each_token_line_carries_its_previews(chatml_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Greedy: the favourite candidate's preview is the reply's own next tokens (an independent check
    of exactness: the reply itself is that branch)."""
    argv = ["run", "--model", str(chatml_model), "--prompt", "tell me a story", "--json", "--preview", "2:4",
            "--temp", "0", "--max-tokens", "7", "--no-config"]
    assert main(argv) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    tokens = [line for line in lines if line["type"] == "token"]
    reply = [t["id"] for t in tokens]
    assert tokens and lines[-1]["type"] == "turn"
    for i, token in enumerate(tokens):
        previews = token["previews"]
        assert [p["candidate"] for p in previews] == [c["id"] for c in token["candidates"][:2]]
        best = previews[0]
        assert best["candidate"] == token["id"]
        rest = reply[i + 1 : i + 5]
        assert best["ids"][: len(rest)] == rest
        assert all(len(p["ids"]) <= 4 and p["finish_reason"] in ("stop", "length") for p in previews)


@pytest.mark.parametrize(("flags", "said"), [
    (["--preview", "3:12"], "--preview needs --json"),
    (["--json", "--preview", "3"], "K:N"),
    (["--json", "--preview", "0:12"], "K:N"),
    (["--json", "--preview", "3:999"], "K:N"),
])
def test_bad_preview_flags_get_one_line(flags: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--model", "demo", "--prompt", "hi", *flags]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1
