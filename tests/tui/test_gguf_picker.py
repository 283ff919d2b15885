"""GGUF files in the model picker, end to end: the engine `logitscope` builds for the demo takes a
GGUF file picked from a typed folder (llama.cpp, a tiny F32 GGUF written by
`engine.gguf.convert`) and switches back to the demo in the same session; without the [gguf]
extra the pick is refused in one line saying how to install it, and the demo stays loaded.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, OptionList
from tinymodels import build_model
from tui_helpers import SIZE, send, wait_idle, wait_until

from engine.core.settings.config import load_config
from tui import main as cli
from tui.app.application import LogitscopeApp
from tui.app.screens.model_picker import ModelPicker

HAVE_GGUF = importlib.util.find_spec("gguf") is not None
HAVE_LLAMA = HAVE_GGUF and importlib.util.find_spec("llama_cpp") is not None
INSTALL_HINT = 'GGUF models need the [gguf] extra: in logitscope\'s folder, python3 -m pip install ".[gguf]"'


@pytest.fixture(scope="module")
def gguf_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding one tiny F32 GGUF chat model (the name says no quantization: the header does)."""
    if not HAVE_GGUF:
        pytest.skip('the gguf package is not installed (pip install "logitscope[gguf]")')
    from engine.gguf.convert import convert_folder

    root = tmp_path_factory.mktemp("gguf-picker")
    folder = build_model(root / "mlx", "chatml", seed=5)
    (root / "models").mkdir()
    convert_folder(folder, root / "models" / "tiny-chat.gguf")
    return root / "models"


def _engine_from_cli(monkeypatch: pytest.MonkeyPatch, config: Path) -> Any:
    """The engine `logitscope --config CONFIG` builds when the model is the demo (the app not run)."""
    built: list[Any] = []
    monkeypatch.setattr(LogitscopeApp, "run", lambda self: built.append(self.engine))
    monkeypatch.delenv("LOGITSCOPE_FAKE_ENGINE", raising=False)
    assert cli.main(["--config", str(config)]) == 0
    return built[0]


def _rows(picker: ModelPicker) -> list[str]:
    options = picker.query_one(OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


async def _pick(app: LogitscopeApp, pilot: Any, typed: str, row_start: str) -> list[str]:
    """Open the picker, type `typed`, wait for a row starting with `row_start` on top, load it."""
    await pilot.press("ctrl+o")
    await wait_until(pilot, lambda: isinstance(app.screen, ModelPicker) and app.screen.entries is not None)
    picker = app.screen
    assert isinstance(picker, ModelPicker)
    picker.query_one(Input).value = typed
    await wait_until(pilot, lambda: _rows(picker)[0].startswith(row_start))
    rows = _rows(picker)
    await pilot.press("enter")
    await wait_until(pilot, lambda: not isinstance(app.screen, ModelPicker))
    await wait_until(pilot, lambda: not app.controller.loading, timeout=60)
    return rows


def _app(engine: Any, config: Path, tmp_path: Path) -> LogitscopeApp:
    return LogitscopeApp(engine, load_config(config), config_dir=tmp_path / "cfg", save_dir=tmp_path / "state")


@pytest.mark.skipif(not HAVE_LLAMA, reason='llama-cpp-python is not installed (pip install "logitscope[gguf]")')
async def test_pick_a_gguf_file_then_the_demo_again(gguf_folder: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[model]\ngguf_threads = 1\n", encoding="utf-8")
    engine = _engine_from_cli(monkeypatch, config)
    app = _app(engine, config, tmp_path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_idle(app, pilot, timeout=60)
            assert engine.model is not None and engine.model.name == "demo"
            app.chat_screen.param_actions.set_params(app.controller.params.with_changes(max_tokens=4, temperature=0.0))
            await send(app, pilot, "hi")
            rows = await _pick(app, pilot, str(gguf_folder), "tiny-chat.gguf")
            assert "folder · GGUF F32 · " in rows[0]  # the quantization from the header, the size
            assert engine.model is not None and engine.model.dtype == "gguf F32", [n.message for n in app._notifications]
            assert engine.model.blas == "llama.cpp (1 thread)"  # [model] gguf_threads
            await send(app, pilot, "hello")
            reply = app.controller.conversation.path()[-1].version
            assert reply.tokens and len(app.controller.conversation.path()) == 4  # the chat stayed
            await _pick(app, pilot, "demo", "demo")
            assert engine.model is not None and engine.model.name == "demo" and not engine.model.dtype.startswith("gguf")
            await send(app, pilot, "and again")
            assert app.controller.conversation.path()[-1].version.tokens
    finally:
        await engine.close()


async def test_without_the_extra_the_pick_says_how_to_install_it(gguf_folder: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    monkeypatch.setenv("LOGITSCOPE_ENGINE_PROCESS", "0")  # the engine in this process, where llama_cpp is hidden
    engine = _engine_from_cli(monkeypatch, config)
    app = _app(engine, config, tmp_path)
    try:
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await wait_idle(app, pilot, timeout=60)
            monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp now raises ImportError
            await _pick(app, pilot, str(gguf_folder / "tiny-chat.gguf"), "tiny-chat.gguf")
            notes = [n.message for n in app._notifications]
            assert f"{INSTALL_HINT} Still using demo." in notes, notes
            assert engine.model is not None and engine.model.name == "demo"
    finally:
        await engine.close()
