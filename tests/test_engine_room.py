"""Room reserved in the cache ahead of a turn: the turn's prefill then writes into it in place.

mlx-lm's `KVCache` grows by copying itself into a bigger buffer inside whichever forward pass
overflows it; `Session.reserve` does that copy while the engine is idle instead. These tests pin
both halves: no reallocation inside the reserved turn, and exactly the logits of a cold run.
"""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import numpy as np
from engine_helpers import cold_logits, reference

from engine.local.session import Session

IDS = [(7 * i + 3) % 50 + 4 for i in range(300)]  # 300 in-vocabulary ids, none of them special


def _session(path: Path, ids: list[int]) -> Session:
    """A session on this thread whose cache holds `ids`."""
    model, tokenizer = reference(path)
    session = Session(model, tokenizer, 4096, mx.default_stream(mx.default_device()))
    session.prefill(ids)
    return session


def _capacities(session: Session) -> list[int]:
    return [layer.keys.shape[2] for layer in session.cache]


def test_a_reserved_cache_takes_the_next_prefill_in_place_with_cold_logits(chatml_model: Path) -> None:
    session = _session(chatml_model, IDS[:250])  # mlx-lm made room for 256: 6 positions left
    assert session.reserve(40) == len(session.cache)
    capacities = _capacities(session)
    assert all(capacity - 250 >= 40 for capacity in capacities)
    logits = np.array(session.forward(mx.array(IDS[250:290])).astype(mx.float32))
    session.tokens.extend(IDS[250:290])
    session.check()
    assert _capacities(session) == capacities  # nothing grew (or was copied) inside the turn
    np.testing.assert_allclose(logits, cold_logits(chatml_model, IDS[:290]), rtol=1e-4, atol=1e-4)


def test_a_cache_with_room_enough_is_left_alone(chatml_model: Path) -> None:
    session = _session(chatml_model, IDS[:100])
    keys = [layer.keys for layer in session.cache]
    assert session.reserve(100) == 0
    assert all(layer.keys is before for layer, before in zip(session.cache, keys))


def test_room_is_reserved_after_a_trim_without_keeping_the_cut_positions(chatml_model: Path) -> None:
    session = _session(chatml_model, IDS[:256])
    assert session.keep_prefix(IDS[:200] + [1, 2]) == 200
    session.reserve(100)
    assert all(layer.offset == 200 and layer.keys.shape[2] - 200 >= 100 for layer in session.cache)
    logits = np.array(session.forward(mx.array(IDS[200:260])).astype(mx.float32))
    np.testing.assert_allclose(logits, cold_logits(chatml_model, IDS[:260]), rtol=1e-4, atol=1e-4)
