"""What-if previews (`engine.local.preview`): each row equals the branch it stands for, the cache the
next turn reuses is untouched, a real command stops them, and bad requests get one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_helpers import GREEDY, reply, run

from engine.core.api import (
    EngineError,
    Message,
    PreviewFinished,
    PreviewRequest,
    PreviewToken,
    SamplingParams,
    TurnFinished,
)
from engine.local.client import Engine

ASK = (Message("user", "tell me a story about a cat"),)
SAMPLED = SamplingParams(temperature=0.9, top_p=0.95, repetition_penalty=1.3, repetition_context_size=8,
                         max_tokens=12, candidates=5)


async def previews(engine: Engine, request: PreviewRequest) -> tuple[list[PreviewToken], PreviewFinished]:
    """One whole preview command: its streamed tokens and the closing record."""
    tokens: list[PreviewToken] = []
    async for item in engine.preview(request):
        if isinstance(item, PreviewFinished):
            return tokens, item
        tokens.append(item)
    raise AssertionError("previews ended without a PreviewFinished")


async def first_reply(engine: Engine, model: Path) -> tuple[TurnFinished, PreviewRequest]:
    """A greedy reply, and a preview request for its top 3 candidates at position 3."""
    await engine.load(str(model))
    events, finished = await run(engine, ASK)
    at = 3
    partial = Message("assistant", "", finished.token_ids[:at])
    candidates = tuple(c.id for c in events[at].candidates[:3])
    return finished, PreviewRequest(ASK + (partial,), candidates, tokens=8, seed=11)


async def branch_ids(engine: Engine, request: PreviewRequest, candidate: int) -> tuple[int, ...]:
    """What the real branch at `candidate` writes after it."""
    branch = request.branch(candidate)
    _, finished = await run(engine, branch.messages, branch.params, continue_last=True)
    return finished.token_ids[len(branch.messages[-1].token_ids or ()):]


@pytest.mark.parametrize("params", [SamplingParams(temperature=0.0), SAMPLED], ids=["greedy", "sampled"])
async def test_each_preview_equals_its_branch(chatml_model: Path, engine: Engine, params: SamplingParams) -> None:
    _, request = await first_reply(engine, chatml_model)
    request = PreviewRequest(request.messages, request.candidates, request.tokens, params, request.seed)
    tokens, finished = await previews(engine, request)
    assert [p.candidate for p in finished.previews] == list(request.candidates)
    for row, preview in enumerate(finished.previews):
        assert preview.token_ids == await branch_ids(engine, request, preview.candidate)
        assert tuple(t.id for t in tokens if t.row == row) == preview.token_ids
        assert preview.finish_reason in ("stop", "length")
    assert any(p.token_ids for p in finished.previews)


async def test_previews_with_candidates_carry_the_branch_statistics(chatml_model: Path, engine: Engine) -> None:
    """#30.2: a preview asked with candidates gives each token every statistic its branch's token
    has (a branch that starts from it keeps them); without candidates, none (a glance)."""
    _, request = await first_reply(engine, chatml_model)
    params = SamplingParams(temperature=0.0, candidates=4, max_tokens=request.tokens)
    asked = PreviewRequest(request.messages, request.candidates[:2], request.tokens, params, request.seed)
    tokens, finished = await previews(engine, asked)
    for row, preview in enumerate(finished.previews):
        branch = asked.branch(preview.candidate)
        events, _ = await run(engine, branch.messages, branch.params, continue_last=True)
        got = [t.stats for t in tokens if t.row == row]
        assert all(s is not None for s in got) and got
        for mine, theirs in zip(got, events):
            assert mine is not None
            assert (mine.id, mine.rank, [c.id for c in mine.candidates]) == (theirs.id, theirs.rank,
                                                                           [c.id for c in theirs.candidates])
            assert mine.entropy == pytest.approx(theirs.entropy, abs=1e-4)
            assert mine.logprob == pytest.approx(theirs.logprob, abs=1e-4)
    glance = PreviewRequest(request.messages, request.candidates[:1], 4, SamplingParams(temperature=0.0, candidates=0), 0)
    plain, _ = await previews(engine, glance)
    assert plain and all(t.stats is None for t in plain)


async def test_window_cache_previews_equal_branches(window_model: Path, engine: Engine) -> None:
    """A sliding-window layer (past its window, so it cannot be cut) is copied, never rewound."""
    _, request = await first_reply(engine, window_model)
    _, finished = await previews(engine, request)
    for preview in finished.previews:
        assert preview.token_ids == await branch_ids(engine, request, preview.candidate)


async def test_previews_leave_the_next_turn_unchanged(chatml_model: Path) -> None:
    """The follow-up turn reuses and prefills exactly the same with or without previews before it."""
    results = []
    for times in (0, 3):
        engine = Engine()
        try:
            finished, request = await first_reply(engine, chatml_model)
            for _ in range(times):
                await previews(engine, request)
            follow = ASK + (reply(finished), Message("user", "and then?"))
            results.append((await run(engine, follow, GREEDY))[1])
        finally:
            await engine.close()
    plain, previewed = results
    assert previewed.reused_tokens == plain.reused_tokens > 0
    assert previewed.prefilled_tokens == plain.prefilled_tokens
    assert previewed.prompt_ids == plain.prompt_ids
    assert previewed.token_ids == plain.token_ids


async def test_a_real_turn_stops_previews_at_once(chatml_model: Path, engine: Engine) -> None:
    _, request = await first_reply(engine, chatml_model)
    long = PreviewRequest(request.messages, request.candidates, 256, SamplingParams(temperature=0.0), 1)
    stream = engine.preview(long)
    _, turn = await run(engine, ASK)  # queued right behind the previews
    _, finished = await previews_of(stream)
    assert turn.generated_tokens > 0
    assert all(p.finish_reason == "cancelled" and len(p.token_ids) < 256 for p in finished.previews)


async def previews_of(stream: object) -> tuple[list[PreviewToken], PreviewFinished]:
    tokens: list[PreviewToken] = []
    async for item in stream:  # type: ignore[attr-defined]
        if isinstance(item, PreviewFinished):
            return tokens, item
        tokens.append(item)
    raise AssertionError("previews ended without a PreviewFinished")


@pytest.mark.parametrize(
    ("messages", "candidates", "said"),
    [
        (ASK, (1,), "ends with a reply"),
        (ASK + (Message("assistant", "", (1, 2)),), (10**9,), "not a token id"),
        (ASK + (Message("assistant", "", (1, 2)),), (), "1 to 16 candidates"),
    ],
)
async def test_bad_requests_get_one_line(chatml_model: Path, engine: Engine, messages: tuple[Message, ...],
                                         candidates: tuple[int, ...], said: str) -> None:
    await engine.load(str(chatml_model))
    with pytest.raises(EngineError, match=said) as caught:
        await previews(engine, PreviewRequest(messages, candidates))
    assert "\n" not in str(caught.value)
    _, after = await run(engine, ASK)  # the engine still serves turns
    assert after.generated_tokens > 0



async def test_scripted_engine_previews_what_its_branch_replays() -> None:
    """The TUI's test double keeps the same promise: a preview is its branch, token for token."""
    from engine.scripted import ScriptedEngine

    engine = ScriptedEngine()
    await engine.load("demo")
    events, finished = await run(engine, ASK, SamplingParams(temperature=0.0))
    at = 2
    candidates = tuple(c.id for c in events[at].candidates[:2])
    request = PreviewRequest(ASK + (Message("assistant", "", finished.token_ids[:at]),), candidates, tokens=4)
    _, done = await previews(engine, request)  # type: ignore[arg-type]
    for preview in done.previews:
        assert preview.token_ids == await branch_ids(engine, request, preview.candidate)  # type: ignore[arg-type]
        assert len(preview.token_ids) == 4 and preview.finish_reason == "length"


async def test_a_remote_engine_says_previews_are_local_only() -> None:
    from engine.remote import RemoteEngine
    from engine.remote.http import HttpOptions

    engine = RemoteEngine(HttpOptions("http://127.0.0.1:9"))
    request = PreviewRequest(ASK + (Message("assistant", "", (1,)),), (2,))
    with pytest.raises(EngineError, match="not available on a remote server"):
        await previews(engine, request)  # type: ignore[arg-type]
    await engine.close()


@pytest.fixture(scope="module")
def hybrid_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A very small Mamba-2/attention hybrid (recurrent state: no layer of it can be trimmed)."""
    from dataclasses import replace

    from engine.bench.folders import write_model_folder
    from engine.bench.rewind_section import REWIND_SHAPES
    from engine.bench.shapes import build_model

    shape = REWIND_SHAPES["hybrid"]
    small = replace(shape, config={**shape.config, "hidden_size": 64, "intermediate_size": 128,
                                   "shared_intermediate_size": 128, "mamba_n_heads": 8, "mamba_d_head": 16,
                                   "mamba_d_state": 16}, dtype="float32")
    return write_model_folder(tmp_path_factory.mktemp("hybrid"), small, build_model(small))


@pytest.mark.slow
async def test_recurrent_state_previews_equal_branches(hybrid_model: Path, engine: Engine) -> None:
    """SSM state is copied from the snapshot where the reply starts, tiled per row, never rewound."""
    _, request = await first_reply(engine, hybrid_model)
    _, finished = await previews(engine, request)
    assert any(p.token_ids for p in finished.previews)
    for preview in finished.previews:
        assert preview.token_ids == await branch_ids(engine, request, preview.candidate)
