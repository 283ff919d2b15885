"""Shared fixtures: tiny model folders, built once per test session (offline, seconds)."""

from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator

import pytest

from real_models import fetch_gemma3, fetch_smollm2
from tinymodels import build_model

from engine.local.client import Engine


@pytest.fixture(autouse=True)
def _private_library(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test (nor an app or `logitscope run` it starts) writes the user's conversation library."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
    monkeypatch.setenv("LOGITSCOPE_KV_CACHE", "off")  # nor the KV caches of its histories (tests/test_kvdisk.py turns it on)


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model-loading tests' read-only source folder (test_models.py and test_hub.py copy it)."""
    return build_model(tmp_path_factory.mktemp("models") / "tiny-chat")


@pytest.fixture(scope="session")
def chatml_model(tiny_root: Path) -> Path:
    """A tiny Llama with a ChatML template (stop token <|im_end|>)."""
    return build_model(tiny_root / "chatml", "chatml")


@pytest.fixture(scope="session")
def llama3_model(tiny_root: Path) -> Path:
    """A tiny Llama with a Llama-3 style template (bos text in the template, stop <|eot_id|>)."""
    return build_model(tiny_root / "llama3", "llama3", seed=1)


@pytest.fixture(scope="session")
def plain_model(tiny_root: Path) -> Path:
    """A tiny Llama without a chat template: plain continuation after <s>."""
    return build_model(tiny_root / "plain", "none", seed=2)


@pytest.fixture(scope="session")
def window_model(tiny_root: Path) -> Path:
    """A tiny Llama whose first layer has a 12-token sliding window (RotatingKVCache)."""
    return build_model(tiny_root / "window", "chatml", seed=3, sliding_window=12)


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct Q4_1 (ChatML), a real GGUF file fetched once (tests/real_models.py)."""
    return fetch_smollm2()


@pytest.fixture(scope="session")
def gemma3_gguf() -> Path:
    """gemma-3-270m Q4_K_M (262k SentencePiece vocabulary, no chat template), fetched once."""
    return fetch_gemma3()


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    """A real engine, closed (thread joined) after the test. It does not warm up inside its load
    (#31.4, tests/test_first_turn.py tests that): the engine tests count what a cold cache is fed
    and reuses, from the first turn on."""
    eng = Engine(warm_on_load=False)
    yield eng
    await eng.close()


@pytest.fixture(autouse=True)
def _fresh_build_budget() -> None:
    """Each test starts as a fresh process does: with the whole start-up wait for C builds
    (`engine.cpu.cbuild.WaitBudget`), not what earlier tests left of it."""
    from engine.cpu import cbuild

    cbuild.process_budget.cache_clear()
