"""The engine process's head start (#30.8): it is started before the app reads its config
(`engine.process.spawn`), and the model the app will ask for loads before it asks
(`engine.process.preload`), the app's load joining that one instead of loading it a second time.

The child's request server runs here on a counting scripted engine, so every load it makes is
seen; the rest goes through real processes and the app's start (`tui.launch.build_app`).
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest

from engine.core.api import LoadProgress, ModelInfo, ModelLoadError
import engine.process.spawn as spawning
from engine.process import ProcessEngine, ScriptedSetup, Spawned
from engine.process.child import Server
from engine.process.wire import WireClosed, read_frame
from engine.scripted import ScriptedEngine


class CountingEngine(ScriptedEngine):
    """A scripted engine that records every load it is asked for."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.loads: list[tuple[str, bool]] = []

    async def load(self, model: str, *, trust_remote_code: bool = False, on_progress: Any = None) -> ModelInfo:
        self.loads.append((model, trust_remote_code))
        return await super().load(model, trust_remote_code=trust_remote_code, on_progress=on_progress)


def frames(out: io.BytesIO) -> list[Any]:
    """Every answer the server wrote, in order."""
    stream = io.BytesIO(out.getvalue())
    found = []
    while True:
        try:
            found.append(read_frame(stream))
        except WireClosed:
            return found


async def settle(server: Server) -> None:
    while server._tasks:  # noqa: SLF001 - the requests it still runs
        await asyncio.sleep(0.01)


async def test_the_apps_load_joins_the_head_start_and_hears_all_its_progress() -> None:
    engine = CountingEngine(load_delay=0.2)
    out = io.BytesIO()
    server = Server(engine, out)
    server.dispatch(("preload", "demo", False))
    await asyncio.sleep(0.12)  # the app is still painting: part of the load is done
    assert engine.loads == [("demo", False)] and engine.model is None
    server.dispatch(("call", 1, "load", ("demo",), {"trust_remote_code": False}))
    await settle(server)
    assert engine.loads == [("demo", False)]  # loaded once, not again when asked
    answers = frames(out)
    progress = [f[2] for f in answers if f[0] == "progress"]
    assert [f[:2] for f in answers if f[0] == "progress"] == [("progress", 1)] * 4
    assert [p.fraction for p in progress] == [0.25, 0.5, 0.75, 1.0]  # said before it joined, replayed
    assert answers[-1][:2] == ("done", 1) and isinstance(answers[-1][2], ModelInfo)
    assert engine.model == answers[-1][2]


async def test_a_finished_head_start_answers_at_once() -> None:
    engine = CountingEngine()
    out = io.BytesIO()
    server = Server(engine, out)
    server.dispatch(("preload", "demo", False))
    await asyncio.sleep(0.05)
    assert engine.model is not None  # loaded before anyone asked
    server.dispatch(("call", 7, "load", ("demo",), {}))
    await settle(server)
    assert engine.loads == [("demo", False)]
    assert frames(out)[-1][:2] == ("done", 7)


async def test_another_model_asked_for_cancels_the_head_start() -> None:
    engine = CountingEngine(load_delay=0.2)
    out = io.BytesIO()
    server = Server(engine, out)
    server.dispatch(("preload", "demo", False))
    await asyncio.sleep(0.01)
    server.dispatch(("call", 2, "load", ("other",), {}))
    await settle(server)
    await asyncio.sleep(0.25)  # the cancelled head start has ended too
    assert engine.loads == [("demo", False), ("other", False)]
    assert frames(out)[-1][:2] == ("done", 2)
    assert engine.model is not None and engine.model.name == "other"


async def test_trusting_remote_code_is_part_of_the_match() -> None:
    engine = CountingEngine()
    server = Server(engine, io.BytesIO())
    server.dispatch(("preload", "demo", False))
    await asyncio.sleep(0.02)
    server.dispatch(("call", 3, "load", ("demo",), {"trust_remote_code": True}))
    await settle(server)
    assert engine.loads == [("demo", False), ("demo", True)]


async def test_a_head_start_after_the_first_load_is_ignored() -> None:
    engine = CountingEngine()
    server = Server(engine, io.BytesIO())
    server.dispatch(("call", 1, "load", ("demo",), {}))
    await settle(server)
    server.dispatch(("preload", "other", False))
    await asyncio.sleep(0.05)
    assert engine.loads == [("demo", False)]


async def test_a_failed_head_start_fails_the_load_that_joins_it() -> None:
    engine = CountingEngine(load_error="no such model: nope")
    out = io.BytesIO()
    server = Server(engine, out)
    server.dispatch(("preload", "nope", False))
    await asyncio.sleep(0.05)
    server.dispatch(("call", 4, "load", ("nope",), {}))
    await settle(server)
    last = frames(out)[-1]
    assert last[:2] == ("fail", 4) and isinstance(last[2], ModelLoadError)
    assert engine.loads == [("nope", False)]


async def test_through_the_process_the_load_after_a_head_start_has_its_progress() -> None:
    engine = ProcessEngine(ScriptedSetup({"load_delay": 0.2}))
    try:
        engine.preload("demo")
        await asyncio.sleep(0.1)
        seen: list[LoadProgress] = []
        info = await engine.load("demo", on_progress=seen.append)
        assert info.name == "scripted-demo" and engine.model == info
        assert [p.fraction for p in seen] == [0.25, 0.5, 0.75, 1.0]
    finally:
        await engine.close()


def test_the_app_start_sends_the_model_it_will_load(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`tui.launch.build_app` asks the engine for a head start on the very model and trust the app
    then loads (the command line's, else the config's default)."""
    import engine.factory
    from tui.launch import build_app, parse_args

    asked: list[tuple[str, bool]] = []

    class HeadStartEngine(ScriptedEngine):
        def preload(self, model: str, *, trust_remote_code: bool = False) -> None:
            asked.append((model, trust_remote_code))

    monkeypatch.setattr(engine.factory, "build_engine", lambda config, choice: HeadStartEngine())
    config = tmp_path / "config.toml"
    config.write_text('[model]\ndefault = "some/model"\ntrust_remote_code = true\n')
    app = build_app(parse_args(["--config", str(config)]))
    assert not isinstance(app, int)
    assert asked == [("some/model", True)] == [(app.model_spec, app.trust_remote_code)]
    app = build_app(parse_args(["--config", str(config), "--model", "demo"]))
    assert not isinstance(app, int)
    assert asked[-1] == ("demo", True) == (app.model_spec, app.trust_remote_code)


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[Spawned]:
    """Every engine process `tui.launch` starts early, kept for the test to look at."""
    started: list[Spawned] = []
    real = spawning.spawn

    def recording(*args: Any, **kwargs: Any) -> Spawned:
        started.append(real(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(spawning, "spawn", recording)
    monkeypatch.delenv("LOGITSCOPE_ENGINE_PROCESS", raising=False)
    monkeypatch.delenv("LOGITSCOPE_FAKE_ENGINE", raising=False)
    return started


def test_the_early_process_is_the_engines(spawned: list[Spawned], tmp_path: Path) -> None:
    from tui.launch import build_app, parse_args

    app = build_app(parse_args(["--config", str(tmp_path / "none.toml"), "--model", "demo"]))
    assert not isinstance(app, int)
    try:
        assert len(spawned) == 1 and spawned[0].taken
        assert isinstance(app.engine, ProcessEngine) and app.engine.pid == spawned[0].process.pid
    finally:
        asyncio.run(app.engine.close())
    assert spawned[0].process.poll() is not None


@pytest.mark.parametrize("case", ["server in the config", "refused flag"])
def test_an_early_process_not_used_is_ended(spawned: list[Spawned], tmp_path: Path, case: str) -> None:
    """Started on the flags alone; the config names a server, or a flag is refused: it ends."""
    from tui.launch import build_app, parse_args

    config = tmp_path / "config.toml"
    config.write_text('[engine]\nserver = "http://127.0.0.1:9"\n' if case == "server in the config" else "")
    argv = ["--config", str(config)] + (["--gguf-threads", "lots"] if case == "refused flag" else [])
    said: list[str] = []
    app = build_app(parse_args(argv), said.append)
    assert len(spawned) == 1 and spawned[0].process.poll() is not None  # ended, not left behind
    if case == "refused flag":
        assert app == 2 and len(said) == 1
    else:
        assert not isinstance(app, int) and not isinstance(app.engine, ProcessEngine)


def test_no_early_process_where_the_flags_say_it_is_not_wanted(spawned: list[Spawned], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.launch import build_app, parse_args

    config = ["--config", str(tmp_path / "none.toml")]
    for argv in (["--server", "http://127.0.0.1:9"], ["--fake-engine"]):
        assert not isinstance(build_app(parse_args(config + argv)), int)
    monkeypatch.setenv("LOGITSCOPE_ENGINE_PROCESS", "0")
    assert not isinstance(build_app(parse_args(config)), int)
    assert spawned == []


async def test_a_process_started_early_serves_once_told_what_to_build() -> None:
    early = spawning.spawn()
    engine = ProcessEngine(ScriptedSetup(), spawned=early)
    try:
        assert early.taken and engine.pid == early.process.pid
        assert (await engine.load("demo")).name == "scripted-demo"
    finally:
        await engine.close()
