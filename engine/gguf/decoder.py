"""The GGUF engine's decode step: llama.cpp's forward pass, the numpy twin of the sampling chain,
and each token's statistics computed on a second thread while llama.cpp decodes the next one.

It plugs into `engine.local.turn` in place of the MLX `_Decoder` (the same `step(fed) -> pending`
shape), so the turn loop, its pipelining order, the cache bookkeeping and the events are the MLX
engine's own. What differs is where the time goes in a token:

- on the engine thread: ``llama_decode`` (the GIL released), one copy of the logits row, and the
  draw (for greedy decoding one argmax over the vocabulary);
- on the statistics thread, meanwhile: softmax, entropy, rank, the top-N candidates.

Measured on an idle 2-core machine (docs/benchmarks-history.md, round 7): with the MLX sampler our decode ran
at 0.58-0.68x llama.cpp's own bare loop on the 30M shape; with this, 0.97-0.99x on the 30M and
Qwen2.5-0.5B shapes in Q4_0, Q8_0 and F16. Every llama.cpp call still happens on the engine
thread; the statistics thread runs numpy only, and whatever fails there reaches the turn (and so
the caller) as the exception of `read`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from engine.core.api import SamplingParams, TurnControl
from engine.gguf.sampler import NumpySampler, statistics
from engine.local.chain import recent_ids
from engine.gguf.sidethread import Result, SideThread

if TYPE_CHECKING:
    from engine.gguf.model import LlamaModel
    from engine.gguf.tuner import InUseThreads
    from engine.local.session import Session


class StatsPending:
    """A chosen token whose statistics row is still being computed."""

    def __init__(self, token: int, row: Result[list[float]], candidates: int, params: SamplingParams) -> None:
        self.token = token
        self.row = row
        self.candidates = candidates
        self.params = params

    def read(self) -> list[float]:
        """The packed statistics row (waits for the statistics thread; re-raises its error)."""
        return self.row.get()


class OverlappedDecoder:
    """Feeds ids to llama.cpp and samples with the live parameters (see the module docstring)."""

    def __init__(self, session: Session, control: TurnControl, stats: SideThread,
                 tuner: InUseThreads | None = None) -> None:
        self.session = session
        self.tuner = tuner  # times the user's decode steps to choose llama.cpp's thread count
        self.model: LlamaModel = session.model
        self.control = control
        self.stats = stats
        self.params = control.params
        self.sampler: NumpySampler | None = None

    def step(self, fed: Any) -> StatsPending:
        """Feed `fed` (an id, or the prompt's last ids), choose the next token now, and hand its
        statistics to the statistics thread."""
        decoding = isinstance(fed, int)
        ids = [fed] if decoding else [int(i) for i in np.asarray(fed).reshape(-1)]
        if self.tuner is not None and decoding:
            self.tuner.tick()  # a decode step: timed
        elif self.tuner is not None:
            self.tuner.restart()  # a prompt: the next block starts afresh
        logits = self.model.feed(ids, self.session.cache)
        params = self.control.params
        if self.sampler is None:
            self.sampler = NumpySampler(logits.shape[0], params, params.seed, self.session.token_vocab)
        elif params is not self.params:
            self.sampler.set_params(params)
        self.params = params
        draw = self.sampler.choose(logits, self._context(ids, params))
        return StatsPending(draw.token, self.stats.submit(statistics, draw), params.candidates, params)

    def _context(self, ids: list[int], params: SamplingParams) -> np.ndarray | None:
        """The ids the penalties look back over (recorded ids, then `ids`), as `_Decoder._context`."""
        assert self.sampler is not None
        if not self.sampler.uses_context:
            return None
        recent = recent_ids(self.session.tokens, params)  # the penalties' and DRY's window
        return np.array(recent + ids, dtype=np.int64)


def decoder_factory(stats: SideThread, tuner: InUseThreads | None = None) -> Any:
    """The `Session.decoder_factory` of a GGUF session: its turns decode with `OverlappedDecoder`."""
    def make(session: Session, control: TurnControl) -> OverlappedDecoder:
        return OverlappedDecoder(session, control, stats, tuner)
    return make


class HandOff:
    """A turn's sink whose items are posted to the caller from the statistics thread, in order.

    Why: posting wakes the caller's event loop, whose thread then takes the GIL to handle the
    event; posted from the engine thread, the engine waited for that (218 us a token of a
    ~1.7 ms decode step, measured with cProfile on the 30M shape). Posted from the statistics
    thread, after the next token's statistics, the caller handles the event while llama.cpp
    decodes with the GIL free. Jobs run first in, first out, so events keep their order; `flush`
    waits until everything handed over has been posted.
    """

    def __init__(self, sink: Callable[[object], None], thread: SideThread) -> None:
        self._sink = sink
        self._thread = thread

    def __call__(self, item: object) -> None:
        try:
            self._thread.post(self._sink, item)
        except RuntimeError:  # the thread is closed (the model is being freed): post directly
            self._sink(item)

    def flush(self) -> None:
        """Wait until every item handed over so far has reached the sink."""
        try:
            self._thread.drain()
        except RuntimeError:  # closed: whatever it still held was posted before it stopped
            pass
