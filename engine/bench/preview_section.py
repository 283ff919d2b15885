"""What-if previews (`engine.local.preview`): k candidates x n tokens as one batch, against the turns it saves.

The claim under test: all previews of 3 candidates x 12 tokens are done within 2x the time of one
12-token greedy continuation from the same point (the batch pays off; three separate branches
would take ~3x), the caller's event loop stays free while they compute, and a turn submitted
meanwhile starts as fast as on an idle engine (previews give way within one decode step).

Everything runs through the real `Engine` (its thread, its cache), timed as a caller sees it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

from engine.core.api import (
    GenerateRequest,
    Message,
    PreviewFinished,
    PreviewRequest,
    SamplingParams,
    TokenEvent,
)
from engine.bench.report import Section
from engine.bench.turns import Contenders, engine_turn, history, words
from engine.local.client import Engine

K, N = 3, 12
PREVIEW_PARAMS = SamplingParams(temperature=0.0, candidates=0, max_tokens=N)  # `[preview]`'s greedy defaults


async def _previews(engine: Engine, request: PreviewRequest) -> float:
    """Seconds from the call to the PreviewFinished."""
    started = time.perf_counter()
    async for item in engine.preview(request):
        if isinstance(item, PreviewFinished):
            break
    return time.perf_counter() - started


async def _turn_s(engine: Engine, request: GenerateRequest) -> float:
    """Seconds from the call to the TurnFinished."""
    started = time.perf_counter()
    await engine_turn(engine, request)
    return time.perf_counter() - started


async def _loop_lag(work: Awaitable[float], tick_s: float = 0.002) -> tuple[float, float]:
    """(work's result, the worst lateness of a `tick_s` timer on this loop meanwhile, seconds)."""
    task = asyncio.ensure_future(work)
    worst = 0.0
    while not task.done():
        started = time.perf_counter()
        await asyncio.sleep(tick_s)
        worst = max(worst, time.perf_counter() - started - tick_s)
    return task.result(), worst


async def _interrupting_ttft(engine: Engine, previews: PreviewRequest, turn: GenerateRequest) -> float:
    """TTFT of `turn` submitted right after long previews started (they must give way)."""
    stream = engine.preview(previews)
    await stream.__anext__()  # the previews are computing
    timing = await engine_turn(engine, turn)
    async for _ in stream:  # the rest ends "cancelled"
        pass
    return timing.ttft_s


def _request(ask: tuple[Message, ...], reply: tuple[TokenEvent, ...], tokens: int) -> PreviewRequest:
    """Previews of the top K candidates halfway through `reply`."""
    cut = len(reply) // 2
    partial = Message("assistant", "".join(t.text for t in reply[:cut]), tuple(t.id for t in reply[:cut]))
    candidates = tuple(c.id for c in reply[cut].candidates[:K])
    return PreviewRequest((*ask, partial), candidates, tokens, PREVIEW_PARAMS.with_changes(max_tokens=tokens), 0)


async def preview_section(section: Section, name: str, contenders: Contenders, history_tokens: int,
                          rounds: int) -> None:
    """Rows for one model: previews vs one continuation vs K continuations, loop lag, interrupted TTFT."""
    engine = contenders.engine
    vocab = len(contenders.tokenizer._tokenizer)
    rows: dict[str, list[float]] = {key: [] for key in ("previews", "one", "each", "lag", "idle", "busy")}
    for round_ in range(rounds):
        rng = random.Random(4000 + round_)
        ask = (*history(history_tokens, vocab, contenders.tokenizer, rng), Message("user", words(30, rng)))
        answer = GenerateRequest(ask, SamplingParams(temperature=0.0, candidates=10, max_tokens=24))
        reply = (await engine_turn(engine, answer)).tokens
        request = _request(ask, reply, N)
        branches = [request.branch(c) for c in request.candidates]
        measured: dict[str, Callable[[], Awaitable[float]]] = {
            "previews": lambda request=request: _previews(engine, request),
            "one": lambda branches=branches: _turn_s(engine, branches[0]),
            "each": lambda branches=branches: _each(engine, branches),
        }
        for key in list(measured)[round_ % 3:] + list(measured)[: round_ % 3]:  # who goes first rotates
            rows[key].append(await measured[key]() * 1e3)
        rows["lag"].append((await _loop_lag(_previews(engine, request)))[1] * 1e3)
        follow = GenerateRequest((*ask, Message("assistant", "".join(t.text for t in reply), tuple(t.id for t in reply)),
                                  Message("user", words(12, rng))), SamplingParams(temperature=0.0, max_tokens=1))
        await engine_turn(engine, answer)  # the cache holds the question and reply again
        rows["idle"].append((await engine_turn(engine, follow)).ttft_s * 1e3)
        await engine_turn(engine, answer)
        rows["busy"].append(await _interrupting_ttft(engine, _request(ask, reply, 200), follow) * 1e3)
    _report(section, name, rows)


async def _each(engine: Engine, branches: list[GenerateRequest]) -> float:
    """Seconds for the branches one after another (what previews without a batch would cost)."""
    total = 0.0
    for branch in branches:
        total += await _turn_s(engine, branch)
    return total


def _report(section: Section, name: str, rows: dict[str, list[float]]) -> None:
    section.add(f"{K} previews x {N} tokens, one batch ({name})", rows["previews"], "ms")
    section.add(f"one {N}-token greedy continuation ({name})", rows["one"], "ms")
    section.add(f"{K} separate {N}-token continuations ({name})", rows["each"], "ms")
    section.compare(f"previews / one continuation ({name})", rows["previews"], rows["one"], 2.0, at_most=True)
    section.compare(f"{K} continuations / previews ({name})", rows["each"], rows["previews"])
    section.add(f"event loop: worst lateness while previews compute ({name})", rows["lag"], "ms")
    section.add(f"TTFT of a turn on an idle engine ({name})", rows["idle"], "ms")
    section.add(f"TTFT of a turn sent while previews compute ({name})", rows["busy"], "ms")
    section.notes.append(f"{name}: previews and continuations greedy without candidates ([preview] defaults), "
                         f"halfway through a 24-token reply; key latency in the app: the tui section")
