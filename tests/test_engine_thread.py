"""One thread owns MLX; the async facade relays plain data, errors in one line, and closes cleanly."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import mlx.core as mx
import pytest
from engine_helpers import reply, run
from mlx_lm.models import cache as cache_module
from mlx_lm.models import llama

import engine.local.sampling
from engine.core.api import EngineAPI, EngineError, LoadProgress, Message, ModelInfo, ModelLoadError, TokenEvent
from engine.local.client import Engine

ROOT = Path(__file__).resolve().parent.parent


def _recording(calls: list[tuple[str, int]], name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append((name, threading.get_ident()))
        return function(*args, **kwargs)

    return wrapper


async def test_every_mlx_call_runs_on_the_engine_thread(chatml_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int]] = []
    targets = [
        (mx, "eval"),
        (mx, "async_eval"),
        (mx, "clear_cache"),
        (llama.Model, "__call__"),
        (cache_module.KVCache, "update_and_fetch"),
        (cache_module.KVCache, "trim"),
        (engine.local.sampling.LiveSampler, "step"),
    ]
    for owner, name in targets:
        monkeypatch.setattr(owner, name, _recording(calls, name, getattr(owner, name)))
    eng = Engine()
    await eng.load(str(chatml_model))
    _, first = await run(eng, [Message("user", "hello")])
    await run(eng, [Message("user", "hello")])  # regenerate: trims the cache
    await run(eng, [Message("user", "hello"), reply(first), Message("user", "more")])
    engine_thread = eng.engine_thread_id
    await eng.close()
    assert engine_thread is not None and engine_thread != threading.get_ident()
    assert {name for name, _ in calls} == {name for _, name in targets}  # each one was exercised
    assert Counter(ident for _, ident in calls) == Counter({engine_thread: len(calls)})


def test_importing_the_client_does_not_import_mlx() -> None:
    code = "import sys, engine.local.client; print(sorted(m for m in sys.modules if m.split('.')[0] in ('mlx', 'mlx_lm')))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


async def test_load_reports_progress_and_model_info(chatml_model: Path) -> None:
    eng = Engine()
    news: list[LoadProgress] = []
    try:
        info = await eng.load(str(chatml_model), on_progress=news.append)
    finally:
        await eng.close()
    assert isinstance(eng, EngineAPI)
    assert info == ModelInfo(
        name="chatml",
        path=str(chatml_model.resolve()),
        context_limit=512,
        vocab_size=info.vocab_size,
        has_chat_template=True,
        parameters=info.parameters,
        dtype="float32",
        blas=info.blas,
    )
    assert info.blas.startswith(("OpenBLAS", "MLX built-in"))
    assert 300 <= info.vocab_size <= 400 and info.parameters > 10_000
    assert news and all(isinstance(p, LoadProgress) for p in news)


async def test_errors_are_one_line_and_the_engine_survives(chatml_model: Path, tmp_path: Path) -> None:
    eng = Engine()
    try:
        with pytest.raises(EngineError, match="No model is loaded"):
            await run(eng, [Message("user", "hi")])
        with pytest.raises(ModelLoadError) as info:
            await eng.load(str(tmp_path / "nothing-here"))
        assert "\n" not in str(info.value) and eng.model is None
        await eng.load(str(chatml_model))
        with pytest.raises(EngineError, match="already ends with a reply"):
            await run(eng, [Message("user", "hi"), Message("assistant", "yo", (5,))])
        events, finished = await run(eng, [Message("user", "hi")])
        assert all(isinstance(e, TokenEvent) for e in events) and finished.generated_tokens > 0
    finally:
        await eng.close()


async def test_close_is_idempotent_and_joins_the_thread(chatml_model: Path) -> None:
    eng = Engine()
    await eng.load(str(chatml_model))
    thread_id = eng.engine_thread_id
    await eng.close()
    await eng.close()
    assert thread_id not in {t.ident for t in threading.enumerate()}
    with pytest.raises(EngineError, match="closed"):
        await run(eng, [Message("user", "hi")])
