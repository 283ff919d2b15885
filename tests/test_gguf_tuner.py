"""llama.cpp's thread count chosen on the user's own turns (`engine.gguf.tuner`, #31.1/#31.3):
blocks of decoded tokens alternate between the candidate counts, the fastest median wins, a
warm-up, a prefill and a turn's unfinished block are never timed, and no result changes (the
same tokens and numbers, bit for bit, as at one fixed count, with counts switched mid-turn)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import run
from test_gguf import CHAT, needs_llama, pair  # noqa: F401 - fixtures

from engine.core.api import SamplingParams
from engine.gguf.tuner import BLOCK, DECISIVE, EARLY_ROUNDS, ROUNDS, SURE_BLOCK_S, InUseThreads


class Clock:
    """A clock that advances by the current thread count's seconds per token at each read."""

    def __init__(self, per_token: dict[int, float]) -> None:
        self.per_token = per_token
        self.now = 0.0
        self.tuner: InUseThreads | None = None

    def __call__(self) -> float:
        assert self.tuner is not None
        self.now += self.per_token[self.tuner.current]
        return self.now


def tuner(per_token: dict[int, float], start: int = 2) -> tuple[InUseThreads, list[int], Clock]:
    switched: list[int] = []
    clock = Clock(per_token)
    made = InUseThreads(tuple(sorted(per_token)), start, switched.append, clock)
    clock.tuner = made
    return made, switched, clock


def decode(made: InUseThreads, tokens: int) -> None:
    """One user's turn: its prompt, then `tokens` decode steps, then its end."""
    made.arm()
    made.restart()
    for _ in range(tokens):
        made.tick()
    made.disarm()


def test_the_counts_alternate_and_the_fastest_is_kept() -> None:
    made, switched, _ = tuner({1: 0.002, 2: 0.003})  # one thread is faster here (the screen takes a core)
    decode(made, 2 * ROUNDS * (BLOCK + 1) + 5)
    assert made.settled and made.chosen == 1 and made.current == 1
    assert all(len(rates) == EARLY_ROUNDS for rates in made.rates.values())  # no doubt left: chosen early
    assert switched == [1, 2, 1]  # blocks at 2 (the load's choice), 1, 2, 1: alternating, so a busier
    # machine weighs on both; then 1 is kept (no switch needed)
    assert made.rates[1][0] == pytest.approx(1 / 0.002) and made.rates[2][0] == pytest.approx(1 / 0.003)


def test_the_first_block_runs_at_the_loads_choice() -> None:
    """The load sets its measured count after the tuner is made: the first block is at that count
    (a reply too short to finish the tuning then runs mostly at the load's choice)."""
    made, switched, _ = tuner({1: 0.003, 2: 0.002}, start=1)
    made.current = 2  # what `LlamaRuntime.set_threads` does when the load's measurement picks 2
    decode(made, BLOCK + 1)
    assert made.rates[2] and not made.rates[1] and switched == [1]  # the block at 2, then the next at 1


def test_long_blocks_far_apart_decide_after_one_round() -> None:
    """The 0.5B shape: blocks of ~0.4 s, one thread ~1.3x slower; a second round at the slow count
    would only cost the user speed."""
    slow, fast = 0.040, 0.040 / 1.3
    assert BLOCK * fast >= SURE_BLOCK_S and 1.3 > DECISIVE
    made, _, _ = tuner({1: slow, 2: fast})
    decode(made, 2 * (BLOCK + 1) + 5)
    assert made.settled and made.chosen == 2 and [len(r) for r in made.rates.values()] == [1, 1]


def test_long_blocks_close_together_take_more_rounds() -> None:
    made, _, _ = tuner({1: 0.030, 2: 0.030 / 1.1})
    decode(made, 2 * (BLOCK + 1) + 5)
    assert not made.settled  # 1.1x from one block each is not enough to be sure
    decode(made, 4 * ROUNDS * (BLOCK + 1))
    assert made.settled and made.chosen == 2


def test_short_blocks_never_decide_after_one_round() -> None:
    """The 30M shape: 16 tokens take ~50 ms, where one frame drawn beside a block moves its rate
    by tens of %: even 2x apart, one block each is not trusted."""
    made, _, _ = tuner({1: 0.004, 2: 0.002})
    assert BLOCK * 0.004 < SURE_BLOCK_S
    decode(made, 2 * (BLOCK + 1) + 5)
    assert not made.settled
    decode(made, 2 * ROUNDS * (BLOCK + 1))
    assert made.settled and made.chosen == 2 and all(len(r) == EARLY_ROUNDS for r in made.rates.values())


def test_overlapping_blocks_run_every_round_and_the_median_decides() -> None:
    made, switched, _ = tuner({1: 0.002, 2: 0.003})
    made.rates = {1: [500.0, 330.0], 2: [400.0, 450.0]}  # two rounds each, overlapping
    made.arm()
    made.tick()  # the third round begins, at the load's choice
    assert not made.settled and made.current == 2
    made.rates[1].append(480.0)
    made.rates[2].append(410.0)
    made._next_block(0.0)  # noqa: SLF001 - the decision, given those blocks
    assert made.settled and made.chosen == 1  # medians 480 against 410


def test_more_threads_win_where_they_are_faster() -> None:
    made, _, _ = tuner({1: 0.004, 2: 0.0025}, start=1)
    decode(made, 2 * ROUNDS * (BLOCK + 1) + 5)
    assert made.chosen == 2 and made.current == 2


def test_a_warm_up_is_never_timed_and_a_turns_unfinished_block_is_dropped() -> None:
    made, switched, _ = tuner({1: 0.002, 2: 0.003})
    made.restart()
    for _ in range(200):  # the load's warm-up: not armed
        made.tick()
    assert switched == [] and not any(made.rates.values())
    decode(made, BLOCK - 1)  # a short reply: its block never completes
    assert not any(made.rates.values())
    for _ in range(40):  # short replies still get there, a block at a time
        decode(made, BLOCK + 1)
    assert made.settled and made.chosen == 1


def test_once_chosen_the_count_stays() -> None:
    made, switched, _ = tuner({1: 0.002, 2: 0.003})
    decode(made, 2 * ROUNDS * (BLOCK + 1) + 5)
    before = list(switched)
    decode(made, 500)
    assert switched == before and made.current == 1


def test_one_candidate_is_chosen_at_once() -> None:
    made = InUseThreads((1,), 1, lambda n: pytest.fail("no switch with one choice"))
    assert made.settled and made.chosen == 1
    decode(made, 100)


async def _in_use(engine: Any) -> InUseThreads:
    """The loaded model's tuner (the engine thread keeps its session once the load is answered)."""
    for _ in range(500):
        session = engine._worker._session  # noqa: SLF001 - the loaded model's runtime
        if session is not None:
            assert session.runtime.in_use is not None
            return session.runtime.in_use
        await asyncio.sleep(0.01)
    raise AssertionError("the engine thread kept no session")


@needs_llama
async def test_the_engine_chooses_on_the_users_turn_and_no_number_changes(
        pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Automatic threads, candidates (1, 2) on any machine: the warm-up leaves nothing timed; one
    long reply settles the count; its tokens and every number equal a run at one fixed thread."""
    import engine.gguf.threads as threads
    from engine.factory import local_engine

    monkeypatch.setattr(threads, "candidate_threads", lambda cpus=None: (1, 2))
    monkeypatch.setenv("XDG_CACHE_HOME", str(pair[1].parent / "cache"))  # no remembered count
    tokens = 2 * ROUNDS * (BLOCK + 1) + 8
    fixed, tuned = local_engine(threads=1), local_engine(threads=0, threads_in_use=True)
    try:
        await fixed.load(str(pair[1]))
        await tuned.load(str(pair[1]))
        in_use = await _in_use(tuned)
        assert not in_use.settled and not any(in_use.rates.values())  # the load's turns were not timed
        eos = fixed.model and await fixed.token_ids("<|im_end|>")
        params = SamplingParams(temperature=0.0, max_tokens=tokens, candidates=5,
                                logit_bias=tuple((i, -100.0) for i in (eos or ())))
        theirs, their_done = await run(fixed, CHAT, params)
        ours, done = await run(tuned, CHAT, params)
        assert done.generated_tokens == their_done.generated_tokens == tokens
        assert in_use.settled and all(1 <= len(r) <= ROUNDS for r in in_use.rates.values())
        assert done.token_ids == their_done.token_ids
        assert done.compute == f"llama.cpp ({in_use.chosen} thread{'s' if in_use.chosen != 1 else ''}, measured)"
        assert their_done.compute == ""  # a count the user set: as the load said (`ModelInfo.blas`)
        assert ours == theirs  # probabilities, ranks, entropies and candidates, exactly
        (again, _), (their_again, _) = await run(tuned, CHAT, params), await run(fixed, CHAT, params)
        assert again == their_again  # at the chosen count, from a cache both built alike
    finally:
        await fixed.close()
        await tuned.close()


def test_the_app_asks_for_tuning_in_use_and_a_headless_run_does_not(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """The app draws its replies (its engine chooses again on them); `logitscope run` keeps the
    load's measurement, timed as a headless run decodes (round 12's headless first reply paid
    0.95x for blocks it did not need)."""
    import engine.factory
    import tui.headless.run as headless
    from engine.core.settings import Config
    from engine.scripted import ScriptedEngine
    from tui.launch import build_app, parse_args

    choices: list[Any] = []

    def recording(config: Any, choice: Any = engine.factory.EngineChoice()) -> ScriptedEngine:
        choices.append(choice)
        return ScriptedEngine()

    monkeypatch.setattr(engine.factory, "build_engine", recording)
    monkeypatch.setenv("LOGITSCOPE_ENGINE_PROCESS", "0")
    app = build_app(parse_args(["--config", str(tmp_path / "none.toml"), "--model", "demo"]))
    assert not isinstance(app, int) and choices[-1].threads_in_use
    headless._real_engine(Config())
    assert not choices[-1].threads_in_use


@needs_llama
async def test_a_headless_engine_keeps_the_loads_count(pair: tuple[Path, Path],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.factory import local_engine

    monkeypatch.setenv("XDG_CACHE_HOME", str(pair[1].parent / "cache"))
    engine = local_engine(threads=0)
    try:
        await engine.load(str(pair[1]))
        for _ in range(500):
            session = engine._worker._session  # noqa: SLF001 - the loaded model's runtime
            if session is not None:
                break
            await asyncio.sleep(0.01)
        assert session is not None and session.runtime.in_use is None
    finally:
        await engine.close()
