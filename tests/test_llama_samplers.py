"""Our sampling stages against llama.cpp's own, through llama-cpp-python's low-level API.

Each stage gets the same logits on both sides (random rows, real rows from a tiny model, rows
with ties, a flat row, a row with -inf); llama.cpp's sampler runs on a ``llama_token_data_array``
built with ctypes (`llama_sampler_apply`), ours on the vocabulary's logits, and the surviving
tokens and their probabilities (the softmax of what each side left) must agree to 1e-5, relative.

Random stages are compared with the same random numbers: llama.cpp draws from
``std::mt19937(seed)``; `Mt19937` below replays that generator (Python's own Mersenne twister,
given the state ``std::mt19937``'s seeding makes) and libstdc++'s conversions to a uniform
number, which we hand to our stage. Where llama.cpp's answer depends on its sort's order among
equal values (``std::sort`` has none: rows with ties), the probabilities are compared as a
multiset instead of by id. Two stages see a row with -inf as llama.cpp's chain hands it on
(without those tokens): typical-p reads ``0 * log 0`` (NaN) and dynamic temperature counts them.
"""

from __future__ import annotations

import ctypes
import importlib.util
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tinymodels import build_model

from engine.local import stages

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None
pytestmark = pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed")
F32 = np.float32


class Mt19937:
    """``std::mt19937(seed)`` and libstdc++'s ``generate_canonical`` over it."""

    def __init__(self, seed: int) -> None:
        state = [seed & 0xFFFFFFFF]
        for i in range(1, 624):
            state.append((1812433253 * (state[-1] ^ (state[-1] >> 30)) + i) & 0xFFFFFFFF)
        self._rng = random.Random()
        self._rng.setstate((3, tuple(state + [624]), None))

    def raw(self) -> int:
        return self._rng.getrandbits(32)

    def uniform_float(self) -> float:
        """``uniform_real_distribution<float>(0, 1)``: one 32-bit draw, in float32."""
        value = F32(F32(self.raw()) / F32(2.0**32))
        return float(value if value < 1 else np.nextafter(F32(1), F32(0)))

    def uniform_double(self) -> float:
        """``uniform_real_distribution<double>`` and ``discrete_distribution``: two 32-bit draws."""
        low = self.raw()
        value = (low + self.raw() * 2.0**32) / 2.0**64
        return value if value < 1 else math.nextafter(1.0, 0.0)


# --- llama.cpp's side


def llama_apply(sampler: Any, logits: np.ndarray, accept: tuple[int, ...] = (),
                keep_finite: bool = False) -> tuple[dict[int, float], int]:
    """Run one llama.cpp sampler on `logits` (token data in id order); (survivors' logits, selected)."""
    import llama_cpp as lib

    ids = [i for i in range(logits.shape[0]) if not keep_finite or np.isfinite(logits[i])]
    data = (lib.llama_token_data * len(ids))(*[lib.llama_token_data(i, float(logits[i]), 0.0) for i in ids])
    array = lib.llama_token_data_array(data=data, size=len(ids), selected=-1, sorted=False)
    try:
        for token in accept:
            lib.llama_sampler_accept(sampler, token)
        lib.llama_sampler_apply(sampler, ctypes.byref(array))
        out = {int(array.data[i].id): float(array.data[i].logit) for i in range(array.size)}
        chosen = int(array.data[array.selected].id) if array.selected >= 0 else -1
    finally:
        lib.llama_sampler_free(sampler)
    return {i: v for i, v in out.items() if v != -math.inf}, chosen


def _probabilities(logits: dict[int, float]) -> dict[int, float]:
    top = max(logits.values())
    e = {i: math.exp(v - top) for i, v in logits.items()}
    total = sum(e.values())
    return {i: v / total for i, v in e.items()}


def ours(x: np.ndarray) -> dict[int, float]:
    return {int(i): float(x[i]) for i in np.flatnonzero(np.isfinite(x))}


def assert_same(mine: dict[int, float], theirs: dict[int, float], by_id: bool = True) -> None:
    """Same survivors (by id, or as a multiset of probabilities where ties leave llama.cpp free)."""
    assert len(mine) == len(theirs), (len(mine), len(theirs))
    p, q = _probabilities(mine), _probabilities(theirs)
    if by_id:
        assert set(p) == set(q)
        a, b = np.array([p[i] for i in sorted(p)]), np.array([q[i] for i in sorted(p)])
    else:
        a, b = np.sort(list(p.values())), np.sort(list(q.values()))
    assert np.allclose(a, b, rtol=1e-5, atol=0), float(np.max(np.abs(a - b) / b))


# --- the rows


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from engine.gguf.convert import convert_folder

    root = tmp_path_factory.mktemp("llama-samplers")
    return convert_folder(build_model(root / "chatml", "chatml", seed=7), root / "tiny-f32.gguf")


@pytest.fixture(scope="module")
def llama(gguf_file: Path) -> Any:
    from engine.gguf.model import LlamaModel

    model = LlamaModel(gguf_file, 256, 1)
    yield model
    model.close()


def rows(llama: Any) -> dict[str, tuple[np.ndarray, bool]]:
    """name -> (row, whether ids are comparable: False where ties leave llama.cpp's order free)."""
    rng = np.random.default_rng(4)
    out: dict[str, tuple[np.ndarray, bool]] = {}
    for n, (vocab, scale) in enumerate(((50, 1.0), (400, 2.5), (3000, 4.0))):
        out[f"random{n}"] = ((rng.standard_normal(vocab) * scale).astype(F32), True)
    for n, prompt in enumerate(("hello there", "the cat sat on the", "1 2 3 4 5")):
        llama.make_cache()
        llama.decode(llama.tokenize(prompt))
        out[f"model{n}"] = (llama.last_logits().astype(F32), True)
    out["ties"] = ((np.round(rng.standard_normal(300) * 2) / 2).astype(F32), False)
    out["flat"] = (np.zeros(200, dtype=F32), False)
    masked = (rng.standard_normal(500) * 2).astype(F32)
    masked[rng.choice(500, 120, replace=False)] = -np.inf
    out["-inf"] = (masked, True)
    return out


def each_row(llama: Any) -> list[tuple[str, np.ndarray, bool]]:
    return [(name, row, by_id) for name, (row, by_id) in rows(llama).items()]


# --- the stages


@pytest.mark.parametrize("n", [0.5, 1.0, 2.0, 3.5])
def test_top_n_sigma(llama: Any, n: float) -> None:
    import llama_cpp as lib

    for name, row, by_id in each_row(llama):
        theirs, _ = llama_apply(lib.llama_sampler_init_top_n_sigma(n), row)
        assert_same(ours(stages.top_n_sigma(row, n)), theirs, by_id), name


@pytest.mark.parametrize("p", [0.2, 0.5, 0.9, 0.99])
def test_typical(llama: Any, p: float) -> None:
    import llama_cpp as lib

    for name, row, by_id in each_row(llama):
        theirs, _ = llama_apply(lib.llama_sampler_init_typical(p, 1), row, keep_finite=True)
        assert_same(ours(stages.typical(row, p)), theirs, by_id), name


@pytest.mark.parametrize("temp,spread,exponent", [(0.8, 0.5, 1.0), (1.2, 1.0, 2.0), (0.3, 0.3, 0.5), (0.7, 0.0, 1.0)])
def test_temperature_and_dynamic_temperature(llama: Any, temp: float, spread: float, exponent: float) -> None:
    import llama_cpp as lib

    for name, row, by_id in each_row(llama):
        theirs, _ = llama_apply(lib.llama_sampler_init_temp_ext(temp, spread, exponent), row, keep_finite=True)
        assert_same(ours(stages.temperature(row, temp, spread, exponent)), theirs, by_id), name


@pytest.mark.parametrize("threshold", [0.05, 0.1, 0.3])
def test_xtc_with_llama_cpp_s_coin(llama: Any, threshold: float) -> None:
    """Same seed, same coin: XTC fires on the same rows and removes the same tokens."""
    import llama_cpp as lib

    fired = 0
    for seed in range(6):
        for name, row, by_id in each_row(llama):
            rng = Mt19937(seed)
            chance = rng.uniform_float() if np.count_nonzero(np.isfinite(row)) >= 2 else 1.0
            theirs, _ = llama_apply(lib.llama_sampler_init_xtc(0.5, threshold, 1, seed), row, keep_finite=True)
            mine = stages.xtc(row, 0.5, threshold, chance)
            fired += mine is not row
            assert_same(ours(mine), theirs, by_id), (name, seed)
    assert fired or threshold > 0.2  # the coin came up for some rows (two tokens above 0.3 are rare)


def test_logit_bias(llama: Any) -> None:
    import llama_cpp as lib

    for name, row, by_id in each_row(llama):
        vocab = row.shape[0]
        bias = [(0, 2.5), (vocab // 2, -3.25), (vocab - 1, stages.BAN), (vocab // 3, 0.75)]
        items = (lib.llama_logit_bias * len(bias))(*[lib.llama_logit_bias(t, -math.inf if b <= stages.BAN else b)
                                                     for t, b in bias])
        theirs, _ = llama_apply(lib.llama_sampler_init_logit_bias(vocab, len(bias), items), row)
        assert_same(ours(stages.logit_bias(row, bias)), theirs, by_id), name


def test_the_draw_with_llama_cpp_s_uniform(llama: Any) -> None:
    """llama.cpp's ``dist`` walks the probabilities in id order, as our draw does: the same
    uniform number picks the same token."""
    import llama_cpp as lib

    for seed in range(5):
        for name, row, by_id in each_row(llama):
            if not by_id:
                continue
            u = Mt19937(seed).uniform_double()
            _, chosen = llama_apply(lib.llama_sampler_init_dist(seed), row)
            weights = np.where(np.isfinite(row), np.exp(row - row.max()), 0).astype(F32)
            assert stages.inverse_cdf(weights, F32(u)) == chosen, (name, seed)


def test_mirostat_v2_over_a_run_of_tokens(llama: Any) -> None:
    """One sampler over eight rows: the same tokens, so mu moved the same way."""
    import llama_cpp as lib

    tau, eta, seed = 3.0, 0.2, 11
    all_rows = [row for _name, row, by_id in each_row(llama) if by_id]
    sampler = lib.llama_sampler_init_mirostat_v2(seed, tau, eta)
    rng, mu = Mt19937(seed), 2 * tau
    try:
        for row in all_rows * 2:
            kept, _token, _mu = stages.mirostat_v2(row, tau, eta, mu, 0.0)  # how many it keeps: one draws no number
            u = rng.uniform_double() if np.count_nonzero(np.isfinite(kept)) > 1 else 0.0
            kept, token, mu = stages.mirostat_v2(row, tau, eta, mu, u)
            ids = list(range(row.shape[0]))
            data = (lib.llama_token_data * len(ids))(*[lib.llama_token_data(i, float(row[i]), 0.0) for i in ids])
            array = lib.llama_token_data_array(data=data, size=len(ids), selected=-1, sorted=False)
            lib.llama_sampler_apply(sampler, ctypes.byref(array))
            theirs = {int(array.data[i].id): float(array.data[i].logit) for i in range(array.size)}
            assert_same(ours(kept), theirs)
            assert token == int(array.data[array.selected].id)
    finally:
        lib.llama_sampler_free(sampler)


def _vocab_functions(llama: Any) -> tuple[Callable[[int], bytes], Callable[[str], list[int]]]:
    """llama.cpp's own detokenization of one id (special tokens rendered) and tokenization
    (nothing added, nothing special parsed), as its DRY sampler uses them."""
    import llama_cpp as lib

    vocab = llama._vocab

    def token_bytes(token: int) -> bytes:
        buffer = ctypes.create_string_buffer(256)
        ids = (lib.llama_token * 1)(token)
        count = lib.llama_detokenize(vocab, ids, 1, buffer, 256, False, True)
        return buffer.raw[:max(count, 0)]

    def tokenize(text: str) -> list[int]:
        raw = text.encode("utf-8")
        out = (lib.llama_token * (len(raw) + 8))()
        count = lib.llama_tokenize(vocab, raw, len(raw), out, len(raw) + 8, False, False)
        return list(out[:count])

    return token_bytes, tokenize


@pytest.mark.parametrize("multiplier,base,allowed,last_n", [(0.8, 1.75, 2, 64), (1.5, 2.0, 1, -1), (0.5, 1.1, 3, 20)])
def test_dry_with_the_model_s_vocabulary(llama: Any, multiplier: float, base: float, allowed: int, last_n: int) -> None:
    import llama_cpp as lib

    token_bytes, tokenize = _vocab_functions(llama)
    vocab = llama.args.vocab_size
    breakers_text = ["\n", ":", "\"", "*", "the cat"]
    breakers = stages.dry_breakers(breakers_text, token_bytes, vocab, tokenize)
    assert breakers  # the tiny vocabulary has tokens holding some breaker
    rng = np.random.default_rng(9)
    newline = tokenize("\n")
    penalised = 0
    for trial in range(8):
        phrase = [int(t) for t in rng.integers(0, vocab, 6)]
        noise = [int(t) for t in rng.integers(0, vocab, int(rng.integers(0, 30)))]
        context = phrase + noise + phrase[: int(rng.integers(max(allowed, 1), 6))]
        if trial % 3 == 2:
            context = phrase + newline + noise + phrase[:4]  # a breaker inside the repetition
        row = (rng.standard_normal(vocab) * 2).astype(F32)
        c_breakers = (ctypes.c_char_p * len(breakers_text))(*[b.encode() for b in breakers_text])
        sampler = lib.llama_sampler_init_dry(llama._vocab, multiplier, base, allowed, last_n if last_n >= 0 else 4096,
                                             c_breakers, len(breakers_text))
        theirs, _ = llama_apply(sampler, row, tuple(context))
        mine = stages.dry(row, context, multiplier, base, allowed, last_n, breakers)
        assert_same(ours(mine), theirs), trial
        penalised += not np.array_equal(mine, row)
    assert penalised  # the repetitions were seen
