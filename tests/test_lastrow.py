"""The output head restricted to the last position: same logits, one forward pass per prompt."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from engine_helpers import GREEDY, run

import mlx.core as mx
import mlx.nn as nn
from engine.core.api import Message
from engine.bench.shapes import build_model, shape_named
from engine.local.client import Engine
from engine.local.lastrow import install_last_row_head


def _check_restricted(model: Any) -> None:
    from mlx_lm.models.cache import make_prompt_cache

    ids = mx.array([[5, 9, 2, 7, 7, 1, 3]])
    full = model(ids, cache=make_prompt_cache(model))
    head = install_last_row_head(model)
    assert head is not None
    with head:
        last = model(ids, cache=make_prompt_cache(model))
    assert last.shape == (1, 1, full.shape[-1])
    np.testing.assert_allclose(np.array(last[0, 0].astype(mx.float32)), np.array(full[0, -1].astype(mx.float32)),
                               rtol=1e-5, atol=1e-5)
    after = model(ids, cache=make_prompt_cache(model))  # outside the context: every position again
    assert after.shape == full.shape


def test_an_untied_head_gives_the_same_last_logits(chatml_model: Path) -> None:
    from mlx_lm.utils import load

    model = load(str(chatml_model))[0]
    assert not model.args.tie_word_embeddings
    _check_restricted(model)


@pytest.mark.parametrize("bits", [None, 4])
def test_a_tied_head_gives_the_same_last_logits(bits: int | None) -> None:
    """Tied embeddings (`embed_tokens.as_linear`), plain and 4-bit (a QuantizedEmbedding)."""
    shape = shape_named("2m").with_bits(bits)
    model = build_model(shape)
    assert model.args.tie_word_embeddings
    _check_restricted(model)


def test_a_model_whose_head_is_not_found_keeps_the_plain_path() -> None:
    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.output = nn.Linear(4, 6)

        def __call__(self, inputs: mx.array, cache: Any = None) -> mx.array:
            return self.output(mx.zeros((*inputs.shape, 4)))

    assert install_last_row_head(Odd()) is None


async def test_the_engine_feeds_a_short_prompt_in_one_pass(chatml_model: Path, engine: Engine,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from mlx_lm.models import llama

    calls: list[tuple[int, ...]] = []
    original = llama.Model.__call__

    def recording(self: Any, inputs: mx.array, *args: Any, **kwargs: Any) -> mx.array:
        out = original(self, inputs, *args, **kwargs)
        if threading.current_thread().name == "logitscope-engine" and kwargs.get("cache") is not None:
            calls.append((int(inputs.shape[1]), int(out.shape[1])))
        return out

    monkeypatch.setattr(llama.Model, "__call__", recording)
    await engine.load(str(chatml_model))
    events, finished = await run(engine, [Message("user", "hello the cat")], GREEDY.with_changes(max_tokens=3))
    assert calls[0] == (finished.prompt_tokens, 1)  # the whole prompt, the head on its last row only
    assert all(fed == 1 for fed, _ in calls[1:]) and len(events) == 3
