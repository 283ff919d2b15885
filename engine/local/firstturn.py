"""A first turn run inside the load, so the user's first turn costs what a later one does (#31.4).

Why: measured on the 30M 4-bit shape, the first turn after a load took 1.2-5 s where the next
ones took 0.1-0.5 s. The work that makes the difference is done once per model: the CPU layer's
choice of float32 copies and the copies themselves (`CpuLayer.after_load`, which ran after the
load was reported, so a message sent at once waited for it), and the first call of every kernel
and traced function a turn uses (the prefill and decode graphs, the sampling chain, the
statistics). Here all of it happens before the load is reported, under a progress line: a short
turn on a two-word message runs through the real turn loop, its events thrown away; then the
cache is emptied and holds only what every first message's prompt starts with (a template's
default system prompt: SmolLM2's is 30 tokens), as the app's warm-up of an empty draft would
leave it (`engine.local.warmup`). Measured after the change: the first turn as fast as the next
(docs/benchmarks-history.md, round 9).
"""

from __future__ import annotations

import statistics
from typing import Any, Callable

from engine.core.api import GenerateRequest, LoadProgress, Message, SamplingParams, TurnControl

WARM_MESSAGE = "Hello there"
WARM_TOKENS = 2  # a prefill and at least one decode step
MEASURED_TOKENS = 8  # per timed turn when a thread count is chosen (#31.1)


def warm_first_turn(session: Any, after_load: Callable[[Callable[[], bool]], None] | None,
                    report: Callable[[LoadProgress], None]) -> str:
    """Do the once-per-model work now (see the module docstring); where the runtime offers
    thread counts to choose from (a GGUF file with no count set), time short turns at each and
    keep the fastest (`engine.gguf.threads.pick_fastest`). Returns the BLAS line to show when
    the count was chosen ("" otherwise). Never fails: a model the warm-up cannot run (a template
    that refuses a lone user message, say) leaves it to the first turn, as before."""
    report(LoadProgress("warming up: the first reply will start as fast as the next", None))
    if after_load is not None:
        after_load(lambda: False)  # the load's own caller is waiting: nothing else can be queued first
    _short_turn(session, SamplingParams(max_tokens=WARM_TOKENS, seed=0))
    line = ""
    choices = session.runtime.thread_choices()
    if len(choices) > 1:
        report(LoadProgress(f"measuring {', '.join(map(str, choices))} threads", None))
        banned = tuple((int(i), -100.0) for i in session.tokenizer.eos_token_ids)  # a full run of tokens each time
        timed = SamplingParams(max_tokens=MEASURED_TOKENS, seed=0, logit_bias=banned)

        def rate(threads: int) -> float:
            session.runtime.set_threads(threads)
            return _short_turn(session, timed)
        line = session.runtime.set_threads(pick_fastest(choices, rate), final=True)
    _reset(session)
    try:
        from engine.local.warmup import warm_cache

        warm_cache(session, (), lambda: False)
    except Exception:  # noqa: BLE001 - likewise: the first turn reads the whole prompt then
        _reset(session)
    return line


def _short_turn(session: Any, params: SamplingParams) -> float:
    """One turn on `WARM_MESSAGE` through the real loop, its events thrown away; its decode
    speed (0.0 when it could not run), and an empty cache after it."""
    from engine.local.turn import run_turn

    request = GenerateRequest((Message("user", WARM_MESSAGE),), params)
    sink, flush = session.runtime.turn_sink(lambda _event: None)
    try:
        return float(run_turn(session, request, TurnControl(params), sink).decode_tps)
    except Exception:  # noqa: BLE001 - a warm-up only; the first turn will say what is wrong
        return 0.0
    finally:
        flush()
        _reset(session)


def _reset(session: Any) -> None:
    session.reset_cache()
    session.rebuilds = 0  # the warm-up's cache was never the user's


def pick_fastest(choices: tuple[int, ...], decode_rate: Callable[[int], float], rounds: int = 2) -> int:
    """The thread count whose decode is fastest, measured `rounds` times each, alternating (a
    machine that gets busier or quieter weighs on every count alike); the median decides, a tie
    goes to fewer threads (they leave the screen and the statistics thread more room)."""
    rates: dict[int, list[float]] = {n: [] for n in choices}
    for _ in range(rounds):
        for n in choices:
            rates[n].append(decode_rate(n))
    return max(choices, key=lambda n: (statistics.median(rates[n]), -n))
