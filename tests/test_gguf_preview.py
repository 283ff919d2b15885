"""What-if previews on GGUF models (`engine.gguf.rows`): each row is a llama.cpp sequence sharing
the chat's cached prefix, decoded together with the others, and equals the branch it stands for
(a plain continuation from that candidate on the same engine); the chat's cache is left exactly as
it was; rows that do not all fit in the context's cells run in several batches; and one preview
batch wider than llama.cpp's batch size is fed in parts. Issue #28.6.

The model is `tinymodels.build_model`'s tiny Llama written as an F32 GGUF (`engine.gguf.convert`).
Skipped when llama-cpp-python (the ``[gguf]`` extra) is not installed; CI installs it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import GREEDY, reply, run
from test_preview import SAMPLED, branch_ids, previews
from tinymodels import build_model

from engine.core.api import ContextLimitError, Message, PreviewRequest, SamplingParams
from engine.local.client import Engine

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None
pytestmark = pytest.mark.skipif(not HAVE_LLAMA, reason='llama-cpp-python is not installed (pip install "logitscope[gguf]")')
ASK = (Message("user", "tell me a story about a cat"),)


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from engine.gguf.convert import convert_folder

    root = tmp_path_factory.mktemp("gguf-preview")
    return convert_folder(build_model(root / "chatml", "chatml", seed=5), root / "chatml-f32.gguf")


async def loaded(path: Path, max_context: int = 0) -> Engine:
    from engine.gguf import GgufLoader

    engine = Engine(max_context, loaders=(GgufLoader(1),))
    await engine.load(str(path))
    return engine


@pytest.fixture
async def engine(gguf_file: Path) -> AsyncIterator[Engine]:
    eng = await loaded(gguf_file)
    yield eng
    await eng.close()


async def request_at(engine: Engine, at: int = 3, rows: int = 3, tokens: int = 8,
                     params: SamplingParams = SamplingParams(temperature=0.0)) -> PreviewRequest:
    """A greedy reply, then a preview request for its top `rows` candidates at position `at`."""
    events, finished = await run(engine, ASK)
    partial = Message("assistant", "", finished.token_ids[:at])
    candidates = tuple(c.id for c in events[at].candidates[:rows])
    return PreviewRequest(ASK + (partial,), candidates, tokens=tokens, params=params, seed=11)


@pytest.mark.parametrize("params", [SamplingParams(temperature=0.0), SAMPLED], ids=["greedy", "sampled"])
async def test_each_preview_equals_its_branch(engine: Engine, params: SamplingParams) -> None:
    request = await request_at(engine, params=params)
    tokens, finished = await previews(engine, request)
    assert [p.candidate for p in finished.previews] == list(request.candidates)
    for row, preview in enumerate(finished.previews):
        assert preview.token_ids == await branch_ids(engine, request, preview.candidate)
        assert tuple(t.id for t in tokens if t.row == row) == preview.token_ids
        assert preview.finish_reason in ("stop", "length")
    assert sum(len(p.token_ids) for p in finished.previews) >= 8


async def test_previews_leave_the_chat_cache_exactly_as_it_was(gguf_file: Path) -> None:
    """The follow-up turn reuses, prefills and writes the same with or without previews before it."""
    results = []
    for times in (0, 2):
        engine = await loaded(gguf_file)
        try:
            request = await request_at(engine)
            for _ in range(times):
                await previews(engine, request)
            _, finished = await run(engine, ASK)
            follow = ASK + (reply(finished), Message("user", "and then?"))
            results.append(await run(engine, follow, GREEDY))
        finally:
            await engine.close()
    (plain_events, plain), (after_events, after) = results
    assert after.reused_tokens == plain.reused_tokens > len(plain.prompt_ids) // 2
    assert after.prefilled_tokens == plain.prefilled_tokens and after.token_ids == plain.token_ids
    assert [e.logprob for e in after_events] == [e.logprob for e in plain_events]


async def long_ask(engine: Engine, tokens: int) -> tuple[Message, ...]:
    """A user message whose prompt is `tokens` to `tokens` + 6 ids long."""
    words = "the cat sat on the mat and then it ran far away".split()
    for count in range(tokens // 3, tokens * 2):
        ask = (Message("user", " ".join(words[i % len(words)] for i in range(count))),)
        if await engine.count_tokens(ask) >= tokens:
            assert await engine.count_tokens(ask) <= tokens + 6
            return ask
    raise AssertionError("no message of that length")


async def test_rows_that_do_not_all_fit_run_in_turns(gguf_file: Path) -> None:
    """A 256-cell context with room for fewer rows than asked beside the chat: every row still
    equals its branch (the rows run in several batches)."""
    from engine.gguf.rows import rows_that_fit

    engine = await loaded(gguf_file, max_context=256)
    try:
        ask = await long_ask(engine, 200)
        events, finished = await run(engine, ask, SamplingParams(temperature=0.0, max_tokens=10))
        partial = Message("assistant", "", finished.token_ids[:2])
        request = PreviewRequest(ask + (partial,), tuple(c.id for c in events[2].candidates[:5]), tokens=12,
                                 params=SamplingParams(temperature=0.0), seed=1)
        session = engine._worker._session  # type: ignore[union-attr]
        assert 1 <= rows_that_fit(session.model, session.cache[0].offset, 1 + 12) < 5  # the case under test
        _, previewed = await previews(engine, request)
        for preview in previewed.previews:
            assert preview.token_ids == await branch_ids(engine, request, preview.candidate)
    finally:
        await engine.close()


async def test_no_room_for_a_preview_is_one_line(gguf_file: Path) -> None:
    engine = await loaded(gguf_file, max_context=256)
    try:
        ask = await long_ask(engine, 232)
        params = SamplingParams(temperature=0.0, max_tokens=12)
        events, finished = await run(engine, ask, params)
        assert len(finished.token_ids) >= 2
        partial = Message("assistant", "", finished.token_ids[:1])
        request = PreviewRequest(ask + (partial,), (events[1].candidates[0].id,), tokens=30)
        with pytest.raises(ContextLimitError) as caught:
            await previews(engine, request)
        assert "\n" not in str(caught.value)
        _, again = await run(engine, ask, params)
        assert again.token_ids == finished.token_ids and again.reused_tokens == len(finished.prompt_ids) - 1
    finally:
        await engine.close()


def test_rows_wider_than_a_batch_are_fed_in_parts(gguf_file: Path) -> None:
    """Three rows of three ids through a batch of four: each row's logits equal that row fed
    alone after the same prefix (llama.cpp called directly, fresh context)."""
    import mlx.core as mx

    from engine.gguf.model import LlamaModel

    prefix = [5, 17, 42, 8, 99]
    rows = np.array([[23, 61, 7], [150, 12, 33], [71, 71, 3]])
    model = LlamaModel(gguf_file, 128, 1, batch=4)
    try:
        cache = model.make_cache()
        model.feed(prefix, cache)
        batch = model.batch_cache(len(prefix) - 1, len(rows))  # the last prefix id fed again, as previews do
        fed = np.concatenate([np.full((len(rows), 1), prefix[-1]), rows], axis=1)
        got = np.array(model(mx.array(fed), cache=batch))[:, -1, :]
        batch[0].close()
        for r, row in enumerate(rows):
            cache = model.make_cache()
            alone = model.feed(prefix + [int(i) for i in row], cache).copy()
            assert np.abs(got[r] - alone).max() < 1e-4
    finally:
        model.close()
