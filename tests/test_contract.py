"""One contract, every engine: the same checks run over the local engine on an MLX folder and on a
GGUF file, the remote engine against a scripted OpenAI-style server, and the scripted test double.

What every front end relies on (`engine.core.api.EngineAPI`): no model before a load and one line
saying so; a load that describes the model and what the engine can do with it (`Abilities`); a
turn that streams numbered tokens with sane numbers and ends in exactly one `TurnFinished`
whose text is the tokens' text; a cancel that ends the turn as "cancelled"; a preview that either
runs or, where the abilities say it cannot, is refused in one line; and nothing after `close`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.core.api import (
    NO_MODEL,
    EngineAPI,
    EngineError,
    GenerateRequest,
    Message,
    ModelInfo,
    PreviewFinished,
    PreviewRequest,
    SamplingParams,
    StageRequest,
    TokenEvent,
    TurnFinished,
)
from remote_server import ScriptedServer, reply
from tinymodels import build_model

KINDS = ("mlx", "gguf", "remote", "scripted")
HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None
HELLO = (Message("user", "hello there"),)
GREEDY = SamplingParams(temperature=0.0, candidates=5, max_tokens=6)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_model(tmp_path_factory.mktemp("contract") / "chatml", "chatml", seed=3)


@pytest.fixture(scope="module")
def server() -> AsyncIterator[ScriptedServer]:
    scripted = ScriptedServer()
    yield scripted  # type: ignore[misc]
    scripted.stop()


def _new_engine(kind: str, server: ScriptedServer) -> EngineAPI:
    """An engine of `kind`, as `engine.factory` builds it for a front end."""
    from engine.core.settings import Config
    from engine.core.settings.sections import EngineConfig
    from engine.factory import EngineChoice, build_engine, local_engine

    if kind in ("mlx", "gguf"):
        return local_engine()
    if kind == "remote":
        server.reset().chunks = reply(["Hello", " there", " friend"])
        return build_engine(Config(engine=EngineConfig(server=server.url, timeout_s=5.0)))
    return build_engine(Config(), EngineChoice(scripted=True, scripted_delay_s=0.0))


async def _spec(kind: str, folder: Path, tmp: Path) -> str:
    if kind == "mlx":
        return str(folder)
    if kind == "gguf":
        if not HAVE_LLAMA:
            pytest.skip('llama-cpp-python is not installed (pip install "logitscope[gguf]")')
        from engine.gguf.convert import convert_folder

        return str(convert_folder(folder, tmp / "contract-f32.gguf"))
    return "scripted" if kind == "remote" else "demo"


@pytest.fixture(params=KINDS)
async def loaded(request: pytest.FixtureRequest, tiny_folder: Path, server: ScriptedServer,
                 tmp_path: Path) -> AsyncIterator[tuple[EngineAPI, ModelInfo]]:
    engine = _new_engine(request.param, server)
    info = await engine.load(await _spec(request.param, tiny_folder, tmp_path))
    yield engine, info
    await engine.close()


async def _turn(engine: EngineAPI, params: SamplingParams = GREEDY) -> tuple[list[TokenEvent], list[TurnFinished]]:
    tokens: list[TokenEvent] = []
    finished: list[TurnFinished] = []
    async for event in engine.generate(GenerateRequest(HELLO, params)):
        (finished if isinstance(event, TurnFinished) else tokens).append(event)  # type: ignore[arg-type]
    return tokens, finished


@pytest.mark.parametrize("kind", KINDS)
async def test_before_a_load_there_is_no_model_and_a_turn_says_so(kind: str, server: ScriptedServer) -> None:
    engine = _new_engine(kind, server)
    try:
        assert engine.model is None
        with pytest.raises(EngineError) as caught:
            await _turn(engine)
        assert "\n" not in str(caught.value)
        if kind != "scripted":  # the double scripts its own refusal
            assert str(caught.value) == NO_MODEL
    finally:
        await engine.close()


async def test_a_load_describes_the_model_and_its_abilities(loaded: tuple[EngineAPI, ModelInfo]) -> None:
    engine, info = loaded
    assert engine.model == info
    assert info.name and info.vocab_size >= 0 and info.context_limit >= 0
    for ability in ("previews", "branching", "token_counting", "live_params", "warm_up"):
        if not getattr(info.abilities, ability) and ability in ("previews", "branching"):
            assert info.abilities.reason(ability), f"{ability} is missing without a reason"


async def test_a_turn_streams_numbered_tokens_and_ends_once(loaded: tuple[EngineAPI, ModelInfo]) -> None:
    engine, _ = loaded
    tokens, finished = await _turn(engine)
    assert len(finished) == 1 and tokens
    done = finished[0]
    assert [t.index for t in tokens] == list(range(len(tokens)))
    assert done.finish_reason in ("stop", "length")
    assert done.text == "".join(t.text for t in tokens)
    for token in tokens:
        assert token.logprob is None or token.logprob <= 1e-6
        assert len(token.candidates) <= GREEDY.candidates
        logprobs = [c.logprob for c in token.candidates if c.logprob is not None and math.isfinite(c.logprob)]
        assert logprobs == sorted(logprobs, reverse=True)


async def test_counting_the_prompt_is_exact_where_the_engine_says_it_can(loaded: tuple[EngineAPI, ModelInfo]) -> None:
    engine, info = loaded
    count = await engine.count_tokens(HELLO)
    assert isinstance(count, int) and count >= 0
    if info.abilities.token_counting:
        assert count > 0


async def test_cancel_ends_the_turn_as_cancelled(loaded: tuple[EngineAPI, ModelInfo]) -> None:
    engine, _ = loaded
    seen: list[object] = []
    async for event in engine.generate(GenerateRequest(HELLO, SamplingParams(temperature=0.0, max_tokens=64))):
        seen.append(event)
        if len(seen) == 1:
            engine.cancel()
    assert isinstance(seen[-1], TurnFinished)
    assert seen[-1].finish_reason in ("cancelled", "stop", "length")  # a very short script may end first
    if len(seen) > 3:
        assert seen[-1].finish_reason == "cancelled"


async def test_a_preview_runs_or_is_refused_as_the_abilities_say(loaded: tuple[EngineAPI, ModelInfo]) -> None:
    engine, info = loaded
    tokens, _ = await _turn(engine)
    first = tuple(c.id for c in tokens[0].candidates[:2]) or (tokens[0].id,)
    request = PreviewRequest(HELLO + (Message("assistant", "", ()),), first, tokens=3, params=GREEDY)
    if info.abilities.previews:
        events = [event async for event in engine.preview(request)]
        assert isinstance(events[-1], PreviewFinished)
    else:
        with pytest.raises(EngineError) as caught:
            async for _ in engine.preview(request):
                pass
        assert str(caught.value) == info.abilities.reason("previews")


async def test_a_stage_view_is_given_or_refused_as_the_abilities_say(loaded: tuple[EngineAPI, ModelInfo]) -> None:
    """Where the engine has whole logits rows the stage view's final column is the sampled
    distribution the turn reported; a remote server has none, and that is said in one line (#32.6)."""
    engine, info = loaded
    params = GREEDY.with_changes(temperature=0.8, top_k=3, seed=4)
    tokens, _ = await _turn(engine, params)
    request = StageRequest(HELLO, tuple(t.id for t in tokens[:2]), params, tuple(c.id for c in tokens[1].candidates))
    if info.abilities.stage_view:
        view = await engine.stages(request)
        final = dict(zip(view.candidates, view.stages[-1][1]))
        assert view.token == tokens[1].id and final[tokens[1].id] > 0
        for cand in tokens[1].candidates:
            assert final[cand.id] == pytest.approx(cand.sampled_prob, abs=1e-5)
    else:
        with pytest.raises(EngineError) as caught:
            await engine.stages(request)
        assert str(caught.value) == info.abilities.reason("stage_view") and "\n" not in str(caught.value)


@pytest.mark.parametrize("kind", KINDS)
async def test_nothing_runs_after_close(kind: str, tiny_folder: Path, server: ScriptedServer, tmp_path: Path) -> None:
    engine = _new_engine(kind, server)
    await engine.load(await _spec(kind, tiny_folder, tmp_path))
    await engine.close()
    with pytest.raises(EngineError):
        await asyncio.wait_for(_turn(engine), 30)
