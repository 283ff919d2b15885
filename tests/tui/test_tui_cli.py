"""The console script: headless commands are forwarded, the TUI flags parse, --help stays clean."""

from __future__ import annotations

import sys
import types

import pytest

from tui import main as cli


def test_run_and_bench_are_forwarded(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    fake = types.ModuleType("tui.headless")
    fake.main = lambda argv: seen.append(list(argv)) or 7  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tui.headless", fake)
    bench = types.ModuleType("tui.bench")
    bench.main = lambda argv: seen.append(["bench", *argv]) or 7  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tui.bench", bench)
    assert cli.main(["run", "--prompt", "hi"]) == 7
    assert cli.main(["bench", "--model", "demo"]) == 7
    assert seen == [["run", "--prompt", "hi"], ["bench", "--model", "demo"]]


def test_flags_and_hidden_fake_engine(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    args = cli._parser().parse_args(["--model", "m", "--trust-remote-code", "--fake-engine"])
    assert args.model == "m" and args.trust_remote_code and cli._use_fake(args)
    plain = cli._parser().parse_args([])
    assert plain.trust_remote_code is None  # None = take it from config
    monkeypatch.setenv("LOGITSCOPE_FAKE_ENGINE", "1")
    assert cli._use_fake(plain)
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "--model" in out and "fake" not in out
