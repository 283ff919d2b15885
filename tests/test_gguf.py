"""engine.gguf: GGUF models through llama.cpp keep the MLX engine's exact contract.

The tiny model of `tinymodels.build_model` is written once as MLX safetensors and once as an F32
GGUF (`engine.gguf.convert`); the two engines must agree (greedy ids equal, logprobs within 1e-3),
and the GGUF engine passes the MLX engine's own checks: a warm turn equals a cold run, every
number on screen equals an independent computation from the logits (llama.cpp called directly,
on a fresh context), seeds reproduce, a regenerate trims the cache to the divergence. Skipped
when llama-cpp-python (the ``[gguf]`` extra) is not installed; CI installs it.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import GREEDY, log_softmax, reply, run
from tinymodels import build_model

from engine.core.api import Message, ModelLoadError, SamplingParams
from engine.local.client import Engine

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None
needs_llama = pytest.mark.skipif(not HAVE_LLAMA, reason='llama-cpp-python is not installed (pip install "logitscope[gguf]")')
CHAT = (Message("user", "hello there, how are you today?"),)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(MLX folder, F32 GGUF file) of the same tiny model."""
    if not HAVE_LLAMA:
        pytest.skip('llama-cpp-python is not installed (pip install "logitscope[gguf]")')
    from engine.gguf.convert import convert_folder

    root = tmp_path_factory.mktemp("gguf")
    folder = build_model(root / "chatml", "chatml", seed=5)
    return folder, convert_folder(folder, root / "chatml-f32.gguf")


@pytest.fixture
async def gguf_engine(pair: tuple[Path, Path]) -> AsyncIterator[Engine]:
    from engine.factory import local_engine

    engine = local_engine()
    await engine.load(str(pair[1]))
    yield engine
    await engine.close()


@needs_llama
async def test_agrees_with_the_mlx_engine(pair: tuple[Path, Path], gguf_engine: Engine) -> None:
    mlx_engine = Engine()
    try:
        await mlx_engine.load(str(pair[0]))
        theirs, mlx_done = await run(mlx_engine, CHAT)
    finally:
        await mlx_engine.close()
    ours, done = await run(gguf_engine, CHAT)
    assert done.prompt_ids == mlx_done.prompt_ids and len(done.token_ids) >= 5
    assert done.token_ids == mlx_done.token_ids
    for a, b in zip(ours, theirs):
        assert abs(a.logprob - b.logprob) < 1e-3 and abs(a.entropy - b.entropy) < 1e-3
        assert [c.id for c in a.candidates] == [c.id for c in b.candidates]


@needs_llama
async def test_warm_turn_equals_cold_run(pair: tuple[Path, Path], gguf_engine: Engine) -> None:
    from engine.factory import local_engine

    _, first = await run(gguf_engine, CHAT)
    second_chat = (*CHAT, reply(first), Message("user", "and the cat?"))
    warm_events, warm = await run(gguf_engine, second_chat)
    assert warm.reused_tokens >= len(first.prompt_ids)  # the first turn stayed in llama.cpp's cache
    from engine.gguf import GgufLoader

    cold_engine = Engine(loaders=(GgufLoader(1),), warm_on_load=False)  # nothing cached before its turn
    try:
        await cold_engine.load(str(pair[1]))
        cold_events, cold = await run(cold_engine, second_chat)
    finally:
        await cold_engine.close()
    assert cold.reused_tokens == 0 and warm.token_ids == cold.token_ids
    assert max(abs(a.logprob - b.logprob) for a, b in zip(warm_events, cold_events)) < 1e-4


@needs_llama
async def test_regenerate_and_edit_trim_to_the_divergence(gguf_engine: Engine) -> None:
    _, first = await run(gguf_engine, CHAT)
    _, again = await run(gguf_engine, CHAT)  # regenerate: everything but the last prompt id is reused
    assert again.reused_tokens == len(first.prompt_ids) - 1 and again.token_ids == first.token_ids
    edited = (Message("user", "hello there, how are you now?"),)
    _, edit = await run(gguf_engine, edited)
    shared = next(i for i, (a, b) in enumerate(zip(first.prompt_ids, edit.prompt_ids)) if a != b)
    assert edit.reused_tokens == shared
    _, back = await run(gguf_engine, CHAT)
    assert back.token_ids == first.token_ids


@needs_llama
async def test_numbers_equal_an_independent_computation(pair: tuple[Path, Path], gguf_engine: Engine) -> None:
    from engine.gguf.model import LlamaModel

    params = SamplingParams(temperature=0.8, top_k=20, seed=3, max_tokens=6, candidates=5)
    events, done = await run(gguf_engine, CHAT, params)
    direct = LlamaModel(pair[1], 512, 1)
    try:
        ids = list(done.prompt_ids)
        for event in events:
            direct.make_cache()
            direct.decode(ids)
            logprobs = log_softmax(direct.last_logits())
            p = np.exp(logprobs)
            assert abs(event.logprob - logprobs[event.id]) < 1e-4
            assert event.rank == 1 + int((logprobs > logprobs[event.id]).sum())
            assert abs(event.entropy - float(-(p * logprobs).sum())) < 1e-4
            assert [c.id for c in event.candidates] == list(np.argsort(-logprobs, kind="stable")[:5])
            kept = np.argsort(-logprobs, kind="stable")[:20]
            scaled = np.exp(logprobs[kept] / 0.8)
            expected = scaled / scaled.sum()
            assert abs(event.sampled_prob - expected[list(kept).index(event.id)]) < 1e-4
            ids.append(event.id)
    finally:
        direct.close()


@needs_llama
async def test_seeds_reproduce(gguf_engine: Engine) -> None:
    params = SamplingParams(temperature=1.0, seed=11, max_tokens=10)
    _, a = await run(gguf_engine, CHAT, params)
    _, b = await run(gguf_engine, CHAT, params)
    _, c = await run(gguf_engine, CHAT, SamplingParams(temperature=1.0, seed=12, max_tokens=10))
    assert a.token_ids == b.token_ids and a.token_ids != c.token_ids


@needs_llama
async def test_every_llama_call_runs_on_the_engine_thread(gguf_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    import llama_cpp

    seen: list[str] = []
    real = llama_cpp.llama_decode

    def spying(*args: object) -> int:
        seen.append(threading.current_thread().name)
        return int(real(*args))

    monkeypatch.setattr(llama_cpp, "llama_decode", spying)
    await run(gguf_engine, CHAT, GREEDY)
    assert seen and set(seen) == {"logitscope-engine"}


@needs_llama
async def test_cancel_within_a_token(gguf_engine: Engine) -> None:
    from engine.core.api import GenerateRequest, TurnFinished

    stream = gguf_engine.generate(GenerateRequest(CHAT, SamplingParams(temperature=1.0, seed=1, max_tokens=400)))
    count = 0
    async for item in stream:
        if isinstance(item, TurnFinished):
            assert item.finish_reason in ("cancelled", "stop") and item.generated_tokens < 400
            break
        count += 1
        if count == 2:
            gguf_engine.cancel()
    _, after = await run(gguf_engine, CHAT)  # the cache bookkeeping survived the cancel
    assert after.token_ids


async def test_bad_files_are_one_line(tmp_path: Path) -> None:
    from engine.factory import local_engine

    text = tmp_path / "notes.gguf"
    text.write_text("hello\x1b[31m", encoding="utf-8")
    engine = local_engine()
    try:
        for spec, words in ((str(tmp_path / "missing.gguf"), "no such GGUF file"), (str(text), "not a GGUF file")):
            with pytest.raises(ModelLoadError) as caught:
                await engine.load(spec)
            message = str(caught.value)
            assert words in message and "\n" not in message and "\x1b" not in message
    finally:
        await engine.close()


@needs_llama
async def test_a_vocabulary_llama_cpp_refuses_gets_its_reason_in_one_line(
        pair: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """llama.cpp's own words, one line, its control characters dropped; the engine keeps going."""
    import gguf

    from engine.factory import local_engine
    from engine.gguf.convert import convert_folder

    write_pre = gguf.GGUFWriter.add_tokenizer_pre
    monkeypatch.setattr(gguf.GGUFWriter, "add_tokenizer_pre", lambda self, _: write_pre(self, "no-such-pre\x1b[31m"))
    bad = convert_folder(pair[0], tmp_path / "bad-pre.gguf")
    engine = local_engine()
    try:
        with pytest.raises(ModelLoadError) as caught:
            await engine.load(str(bad))
        assert str(caught.value) == ("llama.cpp could not load bad-pre.gguf: error loading model vocabulary: "
                                     "unknown pre-tokenizer type: 'no-such-pre[31m'")
        assert (await engine.load(str(pair[1]))).name == pair[1].name
    finally:
        await engine.close()


@needs_llama
def test_loading_reports_llama_cpps_progress(pair: tuple[Path, Path]) -> None:
    """Each stage of llama.cpp's load (most of a 262k vocabulary's seconds pass before any weight),
    then the share of the weights read, rising to 1: the status bar's loading line."""
    from engine.core.api import LoadProgress
    from engine.gguf.load import load_gguf

    seen: list[LoadProgress] = []
    loaded = load_gguf(str(pair[1]), 0, 1, seen.append)
    loaded.model.close()
    fractions = [p.fraction for p in seen if p.fraction is not None]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and len(fractions) >= 2
    assert all(p.message.startswith(f"loading {pair[1].name} with llama.cpp: ") for p in seen)
    stages = list(dict.fromkeys(p.message.split(": ", 1)[1] for p in seen))
    assert stages[:3] == ["header", f"vocabulary ({loaded.model.args.vocab_size:,} tokens)", "weights"]
    assert stages[-1].startswith("a context of")


def test_missing_extra_says_how_to_install(pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.gguf.load import INSTALL_HINT, load_gguf

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp now raises ImportError
    with pytest.raises(ModelLoadError) as caught:
        load_gguf(str(pair[1]), 0, 1)
    assert str(caught.value) == INSTALL_HINT


@needs_llama
@pytest.mark.slow
async def test_draws_follow_the_sampled_distribution(pair: tuple[Path, Path], gguf_engine: Engine) -> None:
    """Chi-square of 300 first tokens (seeds 0..299, temperature 1.2, top-k 8) against the sampled
    distribution the first event reports, itself checked against the logits above."""
    from test_sampling import chi_square_z

    params = SamplingParams(temperature=1.2, top_k=8, max_tokens=1, candidates=8)
    counts: dict[int, int] = {}
    probs: dict[int, float] = {}
    for seed in range(300):
        events, _ = await run(gguf_engine, CHAT, replace(params, seed=seed))
        counts[events[0].id] = counts.get(events[0].id, 0) + 1
        probs.update({c.id: c.sampled_prob for c in events[0].candidates})
    ids = sorted(probs)
    assert set(counts) <= set(ids) and abs(sum(probs.values()) - 1.0) < 1e-4
    z = chi_square_z(np.array([counts.get(i, 0) for i in ids]), np.array([probs[i] for i in ids]))
    assert z < 4.0
    wrong = np.array([probs[i] for i in ids]) ** 2  # the test would notice a wrong chain
    assert chi_square_z(np.array([counts.get(i, 0) for i in ids]), wrong / wrong.sum()) > 4.0


def test_hub_file_that_cannot_be_fetched_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """``owner/repo/file.gguf`` goes to the hub; offline, the answer is one line (no traceback)."""
    from engine.gguf.load import resolve_gguf

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    seen: list[str] = []
    with pytest.raises(ModelLoadError) as caught:
        resolve_gguf("nobody-here/no-such-repo/model-Q4_0.gguf", lambda p: seen.append(p.message))
    assert "no-such-repo" in str(caught.value) and "\n" not in str(caught.value)
    assert seen and "model-Q4_0.gguf" in seen[0]
    assert resolve_gguf("~/models/local.gguf", lambda p: None) == "~/models/local.gguf"


@needs_llama
async def test_qwen2_agrees_with_the_mlx_engine(tmp_path: Path) -> None:
    """A second architecture (q/k/v biases, no RoPE row permutation), from bfloat16 weights."""
    from tinymodels import build_family

    from engine.factory import local_engine
    from engine.gguf.convert import convert_folder

    folder = build_family(tmp_path / "qwen2", "qwen2", seed=4)
    file = convert_folder(folder, tmp_path / "qwen2-f32.gguf")
    results = []
    for engine, spec in ((Engine(), folder), (local_engine(), file)):
        try:
            await engine.load(str(spec))
            results.append(await run(engine, CHAT))
        finally:
            await engine.close()
    (theirs, mlx_done), (ours, done) = results
    assert len(done.token_ids) >= 5 and done.token_ids == mlx_done.token_ids
    assert max(abs(a.logprob - b.logprob) for a, b in zip(ours, theirs)) < 1e-3


@needs_llama
async def test_one_engine_switches_between_mlx_and_gguf(pair: tuple[Path, Path], tmp_path: Path) -> None:
    """The picker may name either kind: one local engine loads both, on one thread; a bad file keeps the model."""
    from engine.factory import local_engine

    engine = local_engine()
    try:
        first = await engine.load(str(pair[0]))
        _, mlx_turn = await run(engine, CHAT)
        info = await engine.load(str(pair[1]))
        assert info.dtype == "gguf F32" and first.dtype != info.dtype
        _, gguf_turn = await run(engine, CHAT)
        assert gguf_turn.token_ids == mlx_turn.token_ids
        bad = tmp_path / "bad.gguf"
        bad.write_bytes(b"GGUF" + b"\0" * 64)
        with pytest.raises(ModelLoadError):
            await engine.load(str(bad))
        _, still = await run(engine, CHAT)  # the GGUF model is still loaded, its cache intact
        assert still.token_ids == gguf_turn.token_ids and still.reused_tokens > 0
        await engine.load(str(pair[0]))
        _, back = await run(engine, CHAT)
        assert back.token_ids == mlx_turn.token_ids
    finally:
        await engine.close()
