"""`Engine`: the real `EngineAPI`, an asyncio facade over the engine thread.

Every call turns into a command for `engine.local.worker.EngineWorker`; results come back as plain data
posted onto this event loop with `call_soon_threadsafe`. Importing this module does not import
MLX (the worker imports it on its own thread), so a TUI can paint before the model loads.
"""

from __future__ import annotations

import asyncio
import threading
from typing import AsyncGenerator, Callable, Sequence

from engine.core.api import (
    EngineError,
    EngineEvent,
    GenerateRequest,
    LoadProgress,
    Message,
    ModelInfo,
    PreviewEvent,
    PreviewFinished,
    PreviewRequest,
    PreviewToken,
    ProbeRequest,
    ProbeResult,
    ProgressCallback,
    SamplingParams,
    Scored,
    ScoreRequest,
    StageRequest,
    StageView,
    TokenEvent,
    TurnControl,
    TurnFinished,
)
from engine.local.commands import (
    CountCommand, GenerateCommand, LoadCommand, PrepareCommand, PreviewCommand, ProbeCommand, ScoreCommand, Sink,
    StagesCommand, TokenizeCommand,
)
from engine.local.loaders import ModelLoader
from engine.local.options import EngineOptions
from engine.local.worker import CLOSE_WAIT_S, EngineWorker


class Engine:
    """The local engine: inference on this machine with a KV cache reused across turns (see
    `engine.core.api.EngineAPI`), for every kind of model file its loaders read."""

    def __init__(
        self, max_context: int = 0, *, fast_blas: bool = True, compute_dtype: str = "auto", fast_layers: bool = True,
        kv_cache_dir: str = "", loaders: Sequence[ModelLoader] = (), warm_on_load: bool = True,
    ) -> None:
        """`max_context` caps the context below the model's own limit (0 = the model's limit);
        `fast_blas`, `compute_dtype`, `fast_layers` and `kv_cache_dir` (recent histories' KV caches
        on disk, `engine.local.kvdisk`) are described in `engine.local.options.EngineOptions`;
        `loaders` read the kinds of model file besides MLX's (`engine.factory` adds GGUF's);
        `warm_on_load`: the first turn's once-per-model work done inside the load (tests that count
        what a cold cache feeds turn it off)."""
        self._options = EngineOptions(max_context, fast_blas, compute_dtype, fast_layers, kv_cache_dir,
                                      warm_on_load=warm_on_load)
        self._loaders = tuple(loaders)
        self._worker: EngineWorker | None = None  # started on first use
        self._model: ModelInfo | None = None
        self._turns: list[TurnControl] = []  # turns submitted and not yet finished
        self._closed = False

    @property
    def model(self) -> ModelInfo | None:
        """The loaded model, or None."""
        return self._model

    @property
    def loaders(self) -> tuple[ModelLoader, ...]:
        """The kinds of model file this engine reads besides MLX's (in the order it asks them)."""
        return self._loaders

    @property
    def engine_thread_id(self) -> int | None:
        """Identity of the thread that runs every MLX call (None before first use)."""
        return self._worker.thread_id if self._worker is not None else None

    def start(self) -> None:
        """Start the engine thread now: its imports (MLX, mlx-lm, transformers: seconds of CPU)
        then run before the first load asks for them (the engine process starts it at once,
        while the app imports Textual). Without it the thread starts on first use."""
        self._ensure_worker()

    async def load(
        self, model: str, *, trust_remote_code: bool = False, on_progress: ProgressCallback | None = None
    ) -> ModelInfo:
        """Load a model by local path or hub id, replacing any loaded one. Raises ModelLoadError,
        and then the previous model is still loaded (the worker frees it only once the new one is in)."""
        loop = asyncio.get_running_loop()
        results: asyncio.Queue[object] = asyncio.Queue()
        worker = self._ensure_worker()
        previous, self._model = self._model, None
        worker.submit(LoadCommand(model, trust_remote_code, _progress(loop, on_progress), _sink(loop, results)))
        try:
            item = await results.get()
        except asyncio.CancelledError:
            self._model = previous  # which one the thread ends with is unknown; the old until told
            raise
        if isinstance(item, BaseException):
            self._model = previous
            raise item
        assert isinstance(item, ModelInfo)
        self._model = item
        return item

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """Start one turn now; iterate for its TokenEvents and the closing TurnFinished.

        Leaving the iteration early (break, task cancelled) cancels the turn.
        """
        try:
            loop = asyncio.get_running_loop()
            worker = self._ensure_worker()
        except (EngineError, RuntimeError) as exc:
            return _raising(exc if isinstance(exc, EngineError) else EngineError(str(exc)))
        control = TurnControl(request.params)
        results: asyncio.Queue[object] = asyncio.Queue()
        self._turns.append(control)
        worker.submit(GenerateCommand(request, control, _sink(loop, results, control)))
        return self._events(results, control)

    async def _events(
        self, results: asyncio.Queue[object], control: TurnControl
    ) -> AsyncGenerator[EngineEvent, None]:
        """Relay one turn's results; an EngineError from the thread is raised here."""
        try:
            while True:
                item = await results.get()
                if isinstance(item, BaseException):
                    raise item
                if not isinstance(item, (TokenEvent, TurnFinished)):
                    raise EngineError(f"The engine sent an unexpected {type(item).__name__} during a turn.")
                yield item
                if isinstance(item, TurnFinished):
                    return
        finally:
            control.cancelled.set()  # harmless after the end; stops a turn whose reader left
            if control in self._turns:
                self._turns.remove(control)

    def preview(self, request: PreviewRequest) -> AsyncGenerator[PreviewEvent, None]:
        """Queue what-if previews (`engine.local.preview`); iterate for PreviewTokens and the closing
        PreviewFinished. Leaving the iteration early stops them within one decode step."""
        try:
            loop = asyncio.get_running_loop()
            worker = self._ensure_worker()
        except (EngineError, RuntimeError) as exc:
            return _raising_preview(exc if isinstance(exc, EngineError) else EngineError(str(exc)))
        cancelled = threading.Event()
        results: asyncio.Queue[object] = asyncio.Queue()
        worker.submit(PreviewCommand(request, cancelled, _sink(loop, results)))
        return _preview_events(results, cancelled)

    async def score(self, request: ScoreRequest) -> Scored:
        """Teacher-forced statistics of every token `request` reads (`engine.local.scoring`), queued
        like a turn and sharing its cache. Cancelling the awaiting task stops it between chunks."""
        loop = asyncio.get_running_loop()
        results: asyncio.Queue[object] = asyncio.Queue()
        cancelled = threading.Event()
        self._ensure_worker().submit(ScoreCommand(request, cancelled, _sink(loop, results)))
        try:
            item = await results.get()
        finally:
            cancelled.set()  # harmless after the end
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, Scored)
        return item

    async def probe(self, request: ProbeRequest) -> tuple[ProbeResult, ...]:
        """Each phrase's probability at a position (`engine.local.scoring`); the chat's cache stays."""
        loop = asyncio.get_running_loop()
        results: asyncio.Queue[object] = asyncio.Queue()
        self._ensure_worker().submit(ProbeCommand(request, _sink(loop, results)))
        item = await results.get()
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, tuple)
        return item

    def prepare(self, messages: Sequence[Message], draft: str = "", thinking: bool | None = None,
                score_candidates: int | None = None) -> asyncio.Future[int]:
        """Start prefilling what the turn after `messages` will share, its user message starting
        with `draft` (`engine.local.warmup`); returns at once. Queued behind running work, it yields to
        any later command between chunks. The future (which callers may ignore: it never fails)
        tells how many ids got cached."""
        loop = asyncio.get_running_loop()
        warmed: asyncio.Future[int] = loop.create_future()
        if self._closed or self._worker is None:  # nothing loaded yet: no cache to warm
            warmed.set_result(0)
            return warmed

        def done(count: int) -> None:
            """Runs on the engine thread."""
            try:
                loop.call_soon_threadsafe(_settle, warmed, count)
            except RuntimeError:  # the loop is closed: nobody is waiting
                pass

        self._worker.submit(PrepareCommand(tuple(messages), draft, done, thinking, score_candidates))
        return warmed

    async def count_tokens(self, messages: Sequence[Message], thinking: bool | None = None) -> int:
        """How many tokens the prompt answering `messages` takes (on the engine thread, queued
        after any running turn, so the count is the loaded model's). Raises EngineError."""
        loop = asyncio.get_running_loop()
        results: asyncio.Queue[object] = asyncio.Queue()
        self._ensure_worker().submit(CountCommand(tuple(messages), _sink(loop, results), thinking))
        item = await results.get()
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, int)
        return item

    async def token_ids(self, text: str) -> tuple[int, ...]:
        """`text` split by the loaded tokenizer, on the engine thread. Raises EngineError."""
        loop = asyncio.get_running_loop()
        results: asyncio.Queue[object] = asyncio.Queue()
        self._ensure_worker().submit(TokenizeCommand(text, _sink(loop, results)))
        item = await results.get()
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, tuple)
        return item

    async def stages(self, request: StageRequest) -> StageView:
        """One token's stage view, recomputed on the engine thread after any running turn
        (`engine.local.stagerows`). Raises EngineError."""
        loop = asyncio.get_running_loop()
        results: asyncio.Queue[object] = asyncio.Queue()
        self._ensure_worker().submit(StagesCommand(request, _sink(loop, results)))
        item = await results.get()
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, StageView)
        return item

    def set_params(self, params: SamplingParams) -> None:
        """Change sampling now: running turns use `params` from their next sampled token."""
        for control in self._turns:
            control.params = params

    def cancel(self) -> None:
        """Stop running (and queued) turns within one token; each finishes as "cancelled"."""
        for control in self._turns:
            control.cancelled.set()

    async def close(self) -> None:
        """Stop and join the engine thread, freeing the model there. Idempotent.

        Waits at most `CLOSE_WAIT_S`: a thread still busy (a template being stopped, a long
        prefill chunk) finishes its command and stops on its own; it is a daemon, so it never
        holds the process's exit."""
        if self._closed:
            return
        self._closed = True
        self.cancel()
        self._model = None
        if self._worker is not None:
            await asyncio.to_thread(self._worker.stop, CLOSE_WAIT_S)  # a busy thread is left behind

    def _ensure_worker(self) -> EngineWorker:
        """The worker, started lazily so constructing an Engine costs nothing (no thread, no MLX)."""
        if self._closed:
            raise EngineError("The engine is closed.")
        if self._worker is None:
            self._worker = EngineWorker(self._options, self._loaders)
        return self._worker


def _sink(loop: asyncio.AbstractEventLoop, results: asyncio.Queue[object], control: TurnControl | None = None) -> Sink:
    """A thread-safe door from the engine thread onto `results` in this event loop."""

    def post(item: object) -> None:
        """Runs on the engine thread: hand `item` over without touching the loop's state."""
        try:
            loop.call_soon_threadsafe(results.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody listens, so stop the turn
            if control is not None:
                control.cancelled.set()

    return post


async def _preview_events(results: asyncio.Queue[object], cancelled: threading.Event
                          ) -> AsyncGenerator[PreviewEvent, None]:
    """Relay one preview command's results; an EngineError from the thread is raised here."""
    try:
        while True:
            item = await results.get()
            if isinstance(item, BaseException):
                raise item
            if not isinstance(item, (PreviewToken, PreviewFinished)):
                raise EngineError(f"The engine sent an unexpected {type(item).__name__} during a preview.")
            yield item
            if isinstance(item, PreviewFinished):
                return
    finally:
        cancelled.set()  # harmless after the end; stops previews whose reader left


async def _raising_preview(error: EngineError) -> AsyncGenerator[PreviewEvent, None]:
    """A preview stream that fails at once."""
    raise error
    yield  # pragma: no cover - makes this an async generator


def _settle(future: asyncio.Future[int], count: int) -> None:
    if not future.done():  # a caller may have cancelled it
        future.set_result(count)


def _progress(loop: asyncio.AbstractEventLoop, callback: ProgressCallback | None) -> Callable[[LoadProgress], None]:
    """Load news, delivered to `callback` on the event loop's thread."""

    def post(progress: LoadProgress) -> None:
        """Runs on the engine thread; progress after the loop closed is simply dropped."""
        if callback is not None:
            try:
                loop.call_soon_threadsafe(callback, progress)
            except RuntimeError:
                pass

    return post


async def _raising(error: EngineError) -> AsyncGenerator[EngineEvent, None]:
    """An event stream that fails at once (keeps `generate` errors on the iteration side)."""
    raise error
    yield  # pragma: no cover - makes this an async generator
