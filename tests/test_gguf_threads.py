"""llama.cpp's thread count as a setting: ``[model] gguf_threads`` and ``--gguf-threads N`` on
``logitscope`` and ``logitscope run`` (the flag over the key, the key over
``LOGITSCOPE_GGUF_THREADS``, 0 = automatic: `engine.gguf.default_threads`); a bad value is one line.
No model is loaded: the engines are built, not started.
"""

from __future__ import annotations

import asyncio

import argparse
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tui.headless import run
from engine.factory import local_engine
from engine.gguf.threads import candidate_threads, remember_threads, remembered_threads, threads_key
from engine.local.firstturn import pick_fastest
from engine.process import ProcessEngine
from engine.gguf import GgufLoader, default_threads
from engine.local.client import Engine
from engine.core.settings import load_config, parse_gguf_threads


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_config_key_and_its_bad_values(tmp_path: Path) -> None:
    assert load_config(_config(tmp_path, "")).config.model.gguf_threads == 0  # documented in config.toml
    assert load_config(_config(tmp_path, "[model]\ngguf_threads = 3\n")).config.model.gguf_threads == 3
    for value, words in (("-1", "must be between 0 and 512, got -1"), ('"4"', "must be a whole number, got '4'"),
                         ("9999", "must be between 0 and 512")):
        loaded = load_config(_config(tmp_path, f"[model]\ngguf_threads = {value}\n"))
        assert loaded.config.model.gguf_threads == 0 and len(loaded.problems) == 1
        assert words in loaded.problems[0] and "[model] gguf_threads" in loaded.problems[0]


def test_the_flag_value() -> None:
    assert [parse_gguf_threads(text) for text in ("0", "4", " 12 ", "512")] == [0, 4, 12, 512]
    for text in ("-1", "two", "1.5", "513", "", "٣", "9" * 5000):
        with pytest.raises(ValueError) as caught:
            parse_gguf_threads(text)
        message = str(caught.value)
        assert message.startswith("--gguf-threads takes a whole number from 0 (automatic) to 512")
        assert "\n" not in message and len(message) < 160


def test_zero_means_the_environment_then_a_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOGITSCOPE_GGUF_THREADS", raising=False)
    assert _threads(local_engine(threads=0)) == 0  # automatic: measured at the load (#31.1)
    monkeypatch.setenv("LOGITSCOPE_GGUF_THREADS", "3")
    assert _threads(local_engine(threads=0)) == 3 and _threads(local_engine(threads=2)) == 2


def _threads(engine: Any) -> int:
    """llama.cpp's thread count of a local engine (its GGUF loader's), in this process or in the
    engine process the app starts (the engine its set-up builds there)."""
    if isinstance(engine, ProcessEngine):
        engine = engine.setup.build()
    assert isinstance(engine, Engine)
    return next(loader.threads for loader in engine.loaders if isinstance(loader, GgufLoader))


def _tui_engine(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> tuple[int, Any]:
    """What `logitscope ARGV` builds (the app not run): (exit status, the engine or None)."""
    from tui import main as cli
    from tui.app.application import LogitscopeApp

    built: list[Any] = []
    monkeypatch.setattr(LogitscopeApp, "run", lambda self: built.append(self.engine))
    monkeypatch.delenv("LOGITSCOPE_FAKE_ENGINE", raising=False)
    code = cli.main(argv)
    for engine in built:
        if isinstance(engine, ProcessEngine):
            asyncio.run(engine.close())  # the app did not run: nobody else ends its process
    return code, (built[0] if built else None)


def test_logitscope_takes_the_flag_over_the_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LOGITSCOPE_GGUF_THREADS", "7")
    config = str(_config(tmp_path, "[model]\ngguf_threads = 2\n"))
    assert _threads(_tui_engine(monkeypatch, ["--config", config])[1]) == 2  # the key over the environment
    assert _threads(_tui_engine(monkeypatch, ["--config", config, "--gguf-threads", "5"])[1]) == 5
    assert _threads(_tui_engine(monkeypatch, ["--config", config, "--gguf-threads", "0"])[1]) == 7  # automatic
    capsys.readouterr()
    code, engine = _tui_engine(monkeypatch, ["--config", config, "--gguf-threads", "lots"])
    err = capsys.readouterr().err
    assert (code, engine) == (2, None)
    assert err == "logitscope: --gguf-threads takes a whole number from 0 (automatic) to 512, got 'lots'\n"


def test_run_takes_the_flag_over_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(_config(tmp_path, "[model]\ngguf_threads = 2\n"))

    def engine_for(*flags: str) -> Any:
        args = run.build_parser().parse_args(["run", "--prompt", "hi", "--config", config, *flags])
        plan = run.plan_run(args)
        return run._real_engine(plan.config)

    assert _threads(engine_for()) == 2
    assert _threads(engine_for("--gguf-threads", "3")) == 3
    with pytest.raises(run.UsageError):
        engine_for("--gguf-threads", "-2")
    assert run.main(["run", "--prompt", "hi", "--model", "x.gguf", "--gguf-threads", "many"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--gguf-threads" in err[0] and "whole number from 0 (automatic) to 512" in err[0]


def test_the_flag_is_in_both_helps() -> None:
    from tui import main as cli

    assert "--gguf-threads" in cli._parser().format_help()
    run_parser = run.build_parser()
    commands = next(a for a in run_parser._actions if isinstance(a, argparse._SubParsersAction))
    assert "--gguf-threads" in commands.choices["run"].format_help()


def test_the_default_is_half_the_usable_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured on 2 cores: ours at 2 llama.cpp threads ran 0.44x (30M) and 0.86x (0.5B) of 1
    thread, since the statistics thread and the caller's need a core too."""
    monkeypatch.delenv("LOGITSCOPE_GGUF_THREADS", raising=False)
    assert [default_threads(n) for n in (1, 2, 3, 4, 8, 16, 64)] == [1, 1, 1, 2, 4, 8, 8]
    assert default_threads() >= 1
    monkeypatch.setenv("LOGITSCOPE_GGUF_THREADS", "6")
    assert default_threads(2) == 6


def test_the_counts_measured_on_two_and_on_eight_cores() -> None:
    """8 cores simulated by the count passed in: the choice is among these, by measurement."""
    assert candidate_threads(1) == (1,) and candidate_threads(2) == (1, 2)
    assert candidate_threads(8) == (4, 7, 8) and candidate_threads(64) == (8,)


def test_the_fastest_count_wins_measured_alternating_with_ties_to_fewer() -> None:
    calls: list[int] = []
    speeds = {1: [50.0, 52.0], 2: [70.0, 40.0, ]}

    def rate(n: int) -> float:
        calls.append(n)
        return speeds[n][sum(1 for c in calls if c == n) - 1]
    assert pick_fastest((1, 2), rate) == 2 and calls == [1, 2, 1, 2]  # medians 51 and 55
    assert pick_fastest((1, 2), lambda n: 10.0) == 1


def test_a_measured_count_is_kept_per_file_and_machine(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 60)
    store = tmp_path / "cache" / "gguf-threads.json"
    key = threads_key(model, cpus=8)
    assert remembered_threads(store, key) is None
    remember_threads(store, key, 7)
    assert remembered_threads(store, key) == 7 and remembered_threads(store, threads_key(model, cpus=2)) is None
    model.write_bytes(b"GGUF" + b"\0" * 61)  # another file at the same path
    assert remembered_threads(store, threads_key(model, cpus=8)) is None
    store.write_text("{not json", encoding="utf-8")
    assert remembered_threads(store, key) is None
    remember_threads(store, key, 3)  # a damaged store is replaced, never an error
    assert remembered_threads(store, key) == 3


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed")
async def test_an_automatic_load_measures_once_then_remembers(tmp_path_factory: pytest.TempPathFactory,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.gguf.convert import convert_folder
    from engine.core.api import LoadProgress
    from tinymodels import build_model

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.delenv("LOGITSCOPE_GGUF_THREADS", raising=False)
    root = tmp_path_factory.mktemp("gguf-threads")
    gguf = convert_folder(build_model(root / "chatml", "chatml", seed=5), root / "m.gguf")
    seen: list[list[str]] = []
    for _ in range(2):
        news: list[LoadProgress] = []
        engine = local_engine(threads=0)
        try:
            info = await engine.load(str(gguf), on_progress=news.append)
        finally:
            await engine.close()
        seen.append([n.message for n in news if n.message.startswith("measuring")])
        assert info.blas.endswith(", measured)")
    expected = candidate_threads()
    assert seen == [[f"measuring {', '.join(map(str, expected))} threads"] if len(expected) > 1 else [], []]
