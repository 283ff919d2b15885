"""Hostile inputs at the engine's door: token ids from a file, a broken speed layer, a template
that never ends. Each is refused with one EngineError; the engine (and the caller) carry on."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_helpers import run

from engine.core.api import EngineError, Message, check_token_ids
from engine.local.client import Engine

ROOT = Path(__file__).resolve().parent.parent


def test_check_token_ids_names_the_message_and_the_range() -> None:
    ok = (Message("user", "hi"), Message("assistant", "x", (0, 5, 399)))
    check_token_ids(ok, 400)
    for bad in (-3, 400, 100_000, 2**31, True, 1.0):
        messages = (Message("user", "hi"), Message("assistant", "x", (1, bad)))  # type: ignore[arg-type]
        with pytest.raises(EngineError, match=r"^Message 2 \(assistant\) holds token id .* not in 0\.\.399"):
            check_token_ids(messages, 400)


async def test_out_of_range_token_ids_are_refused_before_mlx_sees_them(chatml_model: Path, engine: Engine) -> None:
    info = await engine.load(str(chatml_model))
    _, first = await run(engine, [Message("user", "hello")])
    vocab = info.vocab_size
    for bad in (-3, vocab, 2**31, 999_999):
        answer = Message("assistant", "x", (*first.token_ids[:2], bad))
        for messages, branch in (([Message("user", "hello"), answer, Message("user", "more")], False),
                                 ([Message("user", "hello"), answer], True)):
            with pytest.raises(EngineError, match=f"token id {bad}, not in 0..{vocab - 1}"):
                await run(engine, messages, continue_last=branch)
            await engine.prepare(messages)  # the warm-up refuses quietly (its future gives 0)
    _, again = await run(engine, [Message("user", "hello")])  # the engine is still well
    assert again.token_ids == first.token_ids


def _broken_speed_layer(fast_blas: bool, fast_layers: bool) -> object:
    raise AttributeError("libgemv_forward.so: undefined symbol: logitscope_gemv_forward_init")


async def test_a_dying_engine_thread_fails_every_waiting_caller(chatml_model: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("engine.local.backend.speed_layer", _broken_speed_layer)
    eng = Engine()
    try:
        waiting = [asyncio.ensure_future(eng.load(str(chatml_model))), asyncio.ensure_future(eng.load("demo"))]
        for outcome in await asyncio.wait_for(asyncio.gather(*waiting, return_exceptions=True), 10):
            assert isinstance(outcome, EngineError) and "undefined symbol" in str(outcome)
        with pytest.raises(EngineError, match="^The engine stopped: .*undefined symbol"):  # and any later call
            await asyncio.wait_for(run(eng, [Message("user", "hi")]), 10)
        assert await asyncio.wait_for(eng.prepare([Message("user", "hi")]), 10) == 0
    finally:
        await asyncio.wait_for(eng.close(), 5)


def test_logitscope_run_exits_with_one_line_when_the_engine_dies(chatml_model: Path) -> None:
    code = ("import sys, engine.local.backend\n"
            "def broken(*a):\n    raise AttributeError('undefined symbol: logitscope_gemv_forward_init')\n"
            "engine.local.backend.speed_layer = broken\n"
            "from tui.headless.run import main\n"
            f"sys.exit(main(['run', '--model', {str(chatml_model)!r}, '--prompt', 'hi']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 1 and done.stdout == ""
    expected = "logitscope: The engine stopped: undefined symbol: logitscope_gemv_forward_init"
    assert done.stderr.splitlines() == [expected]


LOOPING = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}never"


@pytest.fixture
def looping_model(chatml_model: Path, tmp_path: Path) -> Path:
    """The tiny chat model with a template that would render for hours."""
    folder = tmp_path / "looping-model"
    shutil.copytree(chatml_model, folder)
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config["chat_template"] = LOOPING
    config_file.write_text(json.dumps(config))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    return folder


async def test_a_template_that_never_ends_is_stopped_with_its_name(looping_model: Path, chatml_model: Path,
                                                                   engine: Engine,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("engine.local.watchdog.TEMPLATE_LIMIT_S", 0.5)
    await engine.load(str(looping_model))
    started = time.monotonic()
    with pytest.raises(EngineError, match=r"^The chat template of looping-model ran for over 0.5 s and was stopped"):
        await asyncio.wait_for(run(engine, [Message("user", "hi")]), 30)
    assert time.monotonic() - started < 5
    started = time.monotonic()  # once stopped, the template is refused at once (warm-ups, turns)
    assert await asyncio.wait_for(engine.prepare([Message("user", "hi")]), 30) == 0
    with pytest.raises(EngineError, match="was stopped. It is not run again: load the model again to retry"):
        await run(engine, [Message("user", "hi")])
    assert time.monotonic() - started < 2  # no second 0.5 s render (nor two, for the warm-up)
    await engine.load(str(chatml_model))  # and the engine goes on
    _, finished = await run(engine, [Message("user", "hi")])
    assert finished.generated_tokens > 0


async def test_closing_never_waits_long_on_a_busy_engine_thread(looping_model: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("engine.local.watchdog.TEMPLATE_LIMIT_S", 4.0)  # the thread stays busy past the close
    eng = Engine()
    await eng.load(str(looping_model))
    turn = asyncio.ensure_future(run(eng, [Message("user", "hi")]))
    await asyncio.sleep(0.3)
    started = time.monotonic()
    await eng.close()
    assert time.monotonic() - started < 3
    turn.cancel()
    await asyncio.gather(turn, return_exceptions=True)


MISSING = ("OpenBLAS could not be loaded: the GNU Fortran runtime libgfortran.so.5 is missing "
           "(install it: sudo apt install libgfortran5, or dnf install libgfortran); using MLX's slow BLAS")


async def test_a_fast_blas_that_could_not_load_is_said_once(chatml_model: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.cpu import blas

    monkeypatch.setattr(blas, "enable_fast_blas", lambda enabled=True: blas.BlasInfo(False, MISSING, problem=True))
    eng = Engine()
    try:
        first = await eng.load(str(chatml_model))
        second = await eng.load(str(chatml_model))
    finally:
        await eng.close()
    assert first.blas == "MLX built-in" and first.blas_problem == second.blas_problem == MISSING
    assert first.notes == (f"Fast BLAS off: {MISSING}.",) and second.notes == ()
    assert blas._not_found_reason(["/x/libopenblas.so.0: libgfortran.so.5: cannot open shared object file"]) == MISSING


async def test_a_huge_model_spec_is_echoed_shortened(engine: Engine) -> None:
    for spec in ("/nonexistent/" + "x" * 100_000, "y" * 100_000):
        with pytest.raises(EngineError) as refused:
            await engine.load(spec)
        message = str(refused.value)
        assert len(message) <= 400 and message.startswith(f"Could not load {spec[:20]}") and "…" in message
