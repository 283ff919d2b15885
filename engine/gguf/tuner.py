"""llama.cpp's thread count chosen while the user's own replies decode (#31.1, #31.3).

Why: the load measures each candidate count on short turns whose tokens go nowhere
(`engine.local.firstturn`). In the app the tokens go to a screen that draws them, and on two
cores that drawing takes a share of a core: llama.cpp's threads wait for each other at every
operation, so one preempted thread stalls the step. Measured with the app drawing
(`python -m tui.bench.probe_decode`, round 11): on the 30M Q4_0 file one thread gave 0.79x of
the headless run where two gave 0.59x, while on the 0.5B shape two threads stayed best (0.86x
against 0.65x). The best count depends on the model *and* on what else the machine does, so it
is measured where it is used: the first decoded tokens of the user's turns run in blocks at
each candidate count in turn (the load's choice first), and once every count has had `ROUNDS`
blocks the fastest (the median block) is kept for the rest of this load; sooner when the blocks
leave no doubt, since every block at the slower count costs the user speed: after
`EARLY_ROUNDS` when one count's slowest block beats every other's fastest, and after one round
when the blocks are long enough to time well (`SURE_BLOCK_S`) and one count is faster by
`DECISIVE` or more (the 0.5B shape's blocks take ~0.4 s, and one thread there is ~1.3x slower:
the first reply after a load paid 3-8% for its second round, round 12).

It changes no result: llama.cpp's CPU kernels give every output element to one thread, so the
logits are the same bit for bit at any count (`tests/test_gguf_tuner.py` checks 1 against 2 and
a count switched mid-turn). It is not remembered across loads: the screen, its size and what
else runs change between sessions, and a headless `logitscope run` of the same file is a
different use (the load's own measurement, which is remembered, stays the starting point).

Everything here runs on the engine thread (the decoder calls it between llama.cpp calls).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

BLOCK = 16  # decoded tokens per timed block
ROUNDS = 3  # blocks per candidate count before choosing, at most
EARLY_ROUNDS = 2  # ... or after this many, when one count's slowest block beats every other's fastest
SURE_BLOCK_S = 0.3  # ... or after one, when every block took this long at least (a frame drawn
DECISIVE = 1.2  # beside a block then moves its rate by a few %) and one count is this much faster


class InUseThreads:
    """Chooses among `choices` by timing blocks of decoded tokens of the user's turns."""

    def __init__(self, choices: tuple[int, ...], start: int, set_threads: Callable[[int], None],
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.choices = tuple(choices)
        self.current = start
        self._first: int | None = None  # the count of the first block: the load's choice
        self.chosen: int | None = None if len(self.choices) > 1 else start
        self.rates: dict[int, list[float]] = {n: [] for n in self.choices}
        self._set = set_threads
        self._clock = clock
        self._armed = False
        self._started: float | None = None  # the running block's start
        self._count = 0

    @property
    def settled(self) -> bool:
        return self.chosen is not None

    def arm(self) -> None:
        """A user's turn starts: its decoded tokens may be timed (a warm-up's never are)."""
        self._armed = not self.settled
        self._started = None

    def disarm(self) -> None:
        """The turn ended: a block it left unfinished is dropped (a turn's end is no token)."""
        self._armed = False
        self._started = None

    def restart(self) -> None:
        """A prompt is fed: the next token starts a block afresh (a prefill is no decode step)."""
        self._started = None

    def tick(self) -> None:
        """One decode step is about to run (called before llama.cpp's call for each token)."""
        if not self._armed:
            return
        now = self._clock()
        if self._started is not None:
            self._count += 1
            if self._count < BLOCK:
                return
            elapsed = now - self._started
            if elapsed > 0:
                self.rates[self.current].append(self._count / elapsed)
        self._next_block(now)

    def _next_block(self, now: float) -> None:
        """The count with the fewest blocks so far (the load's choice first, then in order: they
        alternate), or the choice once the blocks allow one."""
        if all(len(self.rates[n]) >= ROUNDS for n in self.choices) or self._clear_winner():
            self.chosen = max(self.choices, key=lambda n: (statistics.median(self.rates[n]), -n))
            self._use(self.chosen)
            self.disarm()
            return
        if self._first is None:  # the load's measurement sets `current` after this was made
            self._first = self.current
        least = min(len(self.rates[n]) for n in self.choices)
        order = sorted(self.choices, key=lambda n: n != self._first)
        self._use(next(n for n in order if len(self.rates[n]) == least))
        self._started, self._count = now, 0

    def _clear_winner(self) -> bool:
        """One round of long blocks with one count `DECISIVE` times faster than every other; or
        `EARLY_ROUNDS` rounds with one count's slowest block faster than all others' fastest."""
        rounds = min(len(self.rates[n]) for n in self.choices)
        if rounds < 1:
            return False
        if rounds < EARLY_ROUNDS:
            rates = self.rates.values()
            if any(BLOCK / rate < SURE_BLOCK_S for counted in rates for rate in counted):
                return False
            return any(all(min(self.rates[n]) >= DECISIVE * max(self.rates[m]) for m in self.choices if m != n)
                       for n in self.choices)
        return any(all(min(self.rates[n]) > max(self.rates[m]) for m in self.choices if m != n)
                   for n in self.choices)

    def _use(self, threads: int) -> None:
        if threads != self.current:
            self._set(threads)
            self.current = threads
