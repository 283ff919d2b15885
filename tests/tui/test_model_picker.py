"""Switching models from the TUI: the picker lists the demo, recent models and the HF cache (scanned
off the event loop), picking one loads it in a new chat and records it, a failed load leaves a
working app with "no model loaded", and the status bar says which dtype and BLAS compute."""

from __future__ import annotations

import asyncio

import threading
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, OptionList

from engine.process import LocalSetup, ProcessEngine

from engine.models import hub
from engine.core.api import ModelInfo
from engine.scripted import ScriptedEngine
from tui import main as cli
from tui.app.application import LogitscopeApp
from tui.app.screens.model_picker import ModelPicker
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.status_bar import StatusBar, compute_label
from tui_helpers import SIZE, palette_run, screen_text, send, wait_idle, wait_until

CACHED = hub.ModelEntry("org/cached-model", "org/cached-model", "cache", "/hf/org--cached-model", 1_500_000_000)


@pytest.fixture
def scan_threads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A fake HF cache holding one model; records the thread each scan ran on."""
    threads: list[int] = []

    def cached_models(cache_dir: object = None) -> list[hub.ModelEntry]:
        threads.append(threading.get_ident())
        return [CACHED]

    monkeypatch.setattr(hub, "cached_models", cached_models)
    return threads


async def _open_picker(app: LogitscopeApp, pilot: Any) -> ModelPicker:
    await pilot.press("ctrl+o")
    await wait_until(pilot, lambda: isinstance(app.screen, ModelPicker) and app.screen.entries is not None)
    await pilot.pause()
    assert isinstance(app.screen, ModelPicker)
    return app.screen


def _rows(picker: ModelPicker) -> list[str]:
    options = picker.query_one(OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


async def test_picker_lists_demo_recent_and_cache_from_a_thread(make_app: Any, scan_threads: list[int]) -> None:
    hub.record_recent("someone/recent-model")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await palette_run(pilot, "Switch model")
        await wait_until(pilot, lambda: isinstance(app.screen, ModelPicker) and app.screen.entries is not None)
        await pilot.pause()
        picker = app.screen
        assert isinstance(picker, ModelPicker)
        rows = _rows(picker)
        assert rows[0].startswith("demo  built-in") and "(loaded)" in rows[0]  # "built-in" said once
        assert rows[1].startswith("someone/recent-model") and "recent · not downloaded" in rows[1]
        assert rows[2].startswith("org/cached-model") and "HF cache · 1.5 GB" in rows[2]
        assert len(rows) == 3
        assert scan_threads and threading.get_ident() not in scan_threads  # never on the event loop
        await pilot.press(*"cached")
        await pilot.pause()
        assert [r.split()[0] for r in _rows(picker)] == ["org/cached-model", "Load"]  # + the typed text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ModelPicker)
        assert app.engine.model is not None and app.engine.model.name == "scripted-demo"  # nothing changed


async def test_picking_loads_keeps_the_chat_and_records_recent(make_app: Any, scan_threads: list[int]) -> None:
    engine = ScriptedEngine(load_delay=2.0)  # long enough to act during the load on a busy CPU
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await wait_until(pilot, lambda: hub.recent_models() == ["demo"])  # the startup load is recorded too
        picker = await _open_picker(app, pilot)
        await pilot.press("down")  # demo -> the cached model
        assert picker.query_one(OptionList).highlighted == 1
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.controller.loading)
        await pilot.pause()
        assert len(app.controller.conversation.path()) == 2  # the chat stays
        assert "org/cached-model" in screen_text(app) and "loading" in screen_text(app)
        chat_input = app.screen.query_one(ChatInput)
        chat_input.focus()
        chat_input.text = "too soon"
        await pilot.press("enter")
        await pilot.pause()
        assert app.controller.loading  # (still: the check below is about a send during the load)
        assert len(app.controller.conversation.path()) == 2
        assert any("A model is loading" in n.message for n in app._notifications)
        await wait_idle(app, pilot)
        assert engine.model is not None and engine.model.name == "org/cached-model"
        await wait_until(pilot, lambda: hub.recent_models() == ["org/cached-model", "demo"])
        text = screen_text(app)
        assert "org/cached-model  float32 · scripted  ready" in text
        await send(app, pilot, "hello again")
        assert [n.role for n in app.controller.conversation.path()] == ["user", "assistant"] * 2


async def test_a_folder_typed_as_a_relative_path_is_marked_loaded(make_app: Any, scan_threads: list[int],
                                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recent list keeps folders by absolute path; the picker compares the loaded one the same way."""
    (tmp_path / "my-model").mkdir()
    monkeypatch.chdir(tmp_path)
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        picker = await _open_picker(app, pilot)
        picker.query_one(Input).value = "./my-model/"
        await pilot.pause()
        await pilot.press("enter")
        await wait_until(pilot, lambda: str(tmp_path / "my-model") in hub.recent_models())
        await wait_idle(app, pilot)
        rows = _rows(await _open_picker(app, pilot))
        loaded = [row for row in rows if "(loaded)" in row]
        assert len(loaded) == 1 and loaded[0].startswith("my-model") and str(tmp_path / "my-model") in loaded[0]


async def test_typed_spec_that_fails_leaves_a_working_app(make_app: Any, scan_threads: list[int]) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        engine.load_error = "nope/missing was not found on the Hugging Face hub"
        picker = await _open_picker(app, pilot)
        picker.query_one(Input).value = "nope/missing"
        await pilot.pause()
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.controller.loading)
        await pilot.pause()
        assert engine.model is not None and engine.model.name == "scripted-demo"  # the old one stays
        notes = [n.message for n in app._notifications]
        assert "nope/missing was not found on the Hugging Face hub Still using scripted-demo." in notes
        bar = app.screen.query_one(StatusBar)
        assert bar.model == "scripted-demo" and bar.compute != "" and "scripted-demo" in screen_text(app)
        assert "nope/missing" not in hub.recent_models()
        await send(app, pilot, "hi")
        assert app.controller.conversation.root is not None


async def test_no_switch_while_a_reply_streams(make_app: Any, scan_threads: list[int]) -> None:
    app = make_app(ScriptedEngine(token_delay=0.2))
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press(*"hi", "enter")
        await wait_until(pilot, lambda: app.controller.busy)
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert not isinstance(app.screen, ModelPicker)
        assert any("then switch models" in n.message for n in app._notifications)
        await pilot.press("escape")


async def test_a_load_counts_from_the_moment_it_is_asked_for(make_app: Any) -> None:
    """Before the load has run a step, a second switch and a send are already refused."""
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        app.switch_model("org/other")
        assert app.controller.loading and not app.controller.can_start  # no await in between
        assert not app.controller.send("too soon")
        app.switch_model("org/third")
        await wait_until(pilot, lambda: any("then switch models" in n.message for n in app._notifications))
        await wait_until(pilot, lambda: not app.controller.loading)
        assert engine.model is not None and engine.model.name == "org/other"


def test_compute_label_is_short() -> None:
    def info(dtype: str, blas: str) -> ModelInfo:
        return ModelInfo("m", "/m", 4096, 100, True, 1, dtype, blas)

    assert compute_label(info("float32", "OpenBLAS (2 threads)")) == "float32 · OpenBLAS"
    assert compute_label(info("bfloat16", "MLX built-in")) == "bfloat16 · MLX built-in"
    assert compute_label(info("float16", "")) == "float16"
    # llama.cpp's thread count is part of what the speed means (chosen by measurement, #31.1)
    assert compute_label(info("gguf Q4_0", "llama.cpp (1 thread, measured)")) == "gguf Q4_0 · llama.cpp 1 thread"
    assert compute_label(info("gguf Q4_0", "llama.cpp (2 threads)")) == "gguf Q4_0 · llama.cpp 2 threads"


def test_cli_builds_the_engine_from_model_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """One engine for MLX folders and GGUF files (the local engine with the GGUF loader), whatever
    the first model is."""
    import engine.local.client
    from engine.gguf import GgufLoader, env_threads

    built: list[dict[str, object]] = []
    ran: list[bool | None] = []

    class Recorder:
        def __init__(self, max_context: int = 0, *, loaders: tuple[object, ...] = (), **options: object) -> None:
            threads = [loader.threads for loader in loaders if isinstance(loader, GgufLoader)]
            built.append({"max_context": max_context, **options, "threads": threads})

    def run(self: LogitscopeApp) -> None:
        ran.append(self.trust_remote_code)

    monkeypatch.setattr(engine.local.client, "Engine", Recorder)
    monkeypatch.setattr(LogitscopeApp, "run", run)
    monkeypatch.delenv("LOGITSCOPE_FAKE_ENGINE", raising=False)
    config = tmp_path / "c.toml"
    config.write_text('[model]\nmax_context = 1234\nfast_blas = false\ncompute_dtype = "float16"\n'
                      "trust_remote_code = true\nfast_layers = false\n", encoding="utf-8")
    made: list[object] = []
    real_setup = ProcessEngine.__init__

    def spawned(self: ProcessEngine, setup: LocalSetup, **kw: object) -> None:
        made.append(setup)
        real_setup(self, setup, **kw)
        asyncio.run(self.close())  # the app does not run here: end its process at once

    monkeypatch.setattr(ProcessEngine, "__init__", spawned)
    assert cli.main(["--config", str(config)]) == 0  # the default: the engine process gets the settings
    assert len(made) == 1 and isinstance(made[0], LocalSetup)
    assert (made[0].model.max_context, made[0].model.fast_blas, made[0].model.compute_dtype) == (1234, False, "float16")
    assert not made[0].model.fast_layers
    made[0].build()  # what the process builds from it: the engine built in-process below
    from_process = list(built)
    built.clear()
    monkeypatch.setenv("LOGITSCOPE_ENGINE_PROCESS", "0")  # in this process: the same engine, built here
    ran.clear()
    assert cli.main(["--config", str(config)]) == 0
    assert built == [{"max_context": 1234, "fast_blas": False, "compute_dtype": "float16", "fast_layers": False,
                      "kv_cache_dir": "", "warm_on_load": True,  # the suite turns the disk KV cache off (conftest)
                      "threads": [env_threads()]}]  # 0 unless the environment sets it: measured at the load (#31.1)
    assert from_process == built
    assert ran == [True]


async def test_a_failed_scan_is_one_line_and_typing_still_works(make_app: Any,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(cache_dir: object = None) -> list[hub.ModelEntry]:
        raise PermissionError("cache is unreadable\nsecond line")

    monkeypatch.setattr(hub, "cached_models", broken)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        picker = await _open_picker(app, pilot)
        assert picker.entries == []
        assert "Could not list local models: cache is unreadable" in screen_text(app)
        assert "second line" not in screen_text(app)
        picker.query_one(Input).value = "org/typed-model"
        await pilot.pause()
        await pilot.press("enter")
        await wait_idle(app, pilot)
        assert app.engine.model is not None and app.engine.model.name == "org/typed-model"


async def test_a_file_both_typed_and_known_is_one_row(make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Typing the folder of a recent GGUF file listed each of its files twice (once found in the
    typed folder, once as a recent one or beside it): one row per spec, the typed folder's first."""
    known = [hub.ModelEntry("/m/a.gguf", "a.gguf", "recent", "/m/a.gguf", 10, "gguf", "Q4_0"),
             hub.ModelEntry("/m/b.gguf", "m/b.gguf", "folder", "/m/b.gguf", 20, "gguf", "F16")]
    typed = [hub.ModelEntry("/m/a.gguf", "a.gguf", "folder", "/m/a.gguf", 10, "gguf", "Q4_0"),
             hub.ModelEntry("/m/b.gguf", "b.gguf", "folder", "/m/b.gguf", 20, "gguf", "F16")]
    monkeypatch.setattr(hub, "cached_models", lambda cache_dir=None: [])
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        picker = ModelPicker(lambda: known, None, lambda path: typed)
        app.push_screen(picker)
        await wait_until(pilot, lambda: picker.entries is not None)
        picker.query_one(Input).value = "/m"
        await wait_until(pilot, lambda: picker.typed[0] == "/m")
        await pilot.pause()
        rows = _rows(picker)
        assert sum("/m/a.gguf" in row for row in rows) == 1 and sum("/m/b.gguf" in row for row in rows) == 1
        assert rows[0].startswith("a.gguf") and "folder" in rows[0]


async def test_the_status_bar_says_the_count_chosen_on_the_users_replies(make_app: Any) -> None:
    """`TurnFinished.compute` (llama.cpp's thread count chosen again while the user's replies
    decode, `engine.gguf.tuner`) replaces the load's in the status bar; a new load starts over."""
    from dataclasses import replace

    from engine.core.api import TurnFinished
    from tui_helpers import send

    engine = ScriptedEngine()
    real = engine.generate

    async def generate(request: Any) -> Any:
        async for item in real(request):
            yield replace(item, compute="llama.cpp (1 thread, measured)") if isinstance(item, TurnFinished) else item

    engine.generate = generate  # type: ignore[method-assign]
    app = make_app(engine)
    async with app.run_test(size=(160, 40)) as pilot:
        await send(app, pilot, "hi")
        bar = app.screen.query_one(StatusBar)
        assert bar.compute == "float32 · llama.cpp 1 thread"
        assert "llama.cpp 1 thread" in str(bar.render())
