"""`ProcessEngine`: the `EngineAPI` the app uses, with the engine in a process of its own.

Why a process (#30.8, #31.3): in one interpreter the engine's Python (the MLX and mlx-lm imports
at start, a few hundred microseconds of it between two forward passes) and Textual's (its import,
every frame it lays out and draws) take turns under one lock, so each waits for the other: the
app was ready 1.2-1.6 s after `mlx_lm.chat` on the same model, and decoded at 0.65-0.81x of
the headless run. Two processes run side by side on two cores, and the app stays responsive
whatever the engine does: a load that runs out of memory ends the engine process, not the chat.

Every call becomes a frame for `engine.process.child`, which runs it on the same in-process
engine (`engine.local.client.Engine`); answers come back on a reader thread and are posted onto
the caller's event loop. Spawned when this is built, so the child's imports start at once.
If the process dies, every waiting call fails with one line saying so (its last words on
standard error included), and the next call starts a fresh process (no model loaded).
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import threading
from typing import Any, AsyncGenerator, Callable, Sequence

from engine.core.api import (
    EngineError, EngineEvent, GenerateRequest, Message, ModelInfo, PreviewEvent, PreviewFinished, PreviewRequest,
    ProbeRequest, ProbeResult, ProgressCallback, SamplingParams, Scored, ScoreRequest, StageRequest, StageView,
    TurnFinished,
)
from engine.process.setup import EngineSetup
from engine.process.running import RunningProcess
from engine.process.spawn import Spawned, spawn
from engine.process.wire import encode

CLOSE_WAIT_S = 6.0  # the child's own close is bounded at 5 s; then it is killed

Deliver = Callable[[Any], None]


class ProcessEngine:
    """The engine described by `setup`, run in a child process (see the module's docstring)."""

    def __init__(self, setup: EngineSetup, *, python: str = sys.executable, spawned: Spawned | None = None) -> None:
        """`spawned`: a process already started (`engine.process.spawn`, before the app read its
        config); it is told `setup` now. Without it, one is started here."""
        self._setup = setup
        self._python = python
        self._model: ModelInfo | None = None
        self._closed = False
        self._ids = itertools.count(1)
        self._routes: dict[int, tuple[asyncio.AbstractEventLoop, Deliver]] = {}
        self._lock = threading.Lock()  # guards `_routes`, `_child` and the writes
        self._child: RunningProcess | None = None
        self._lost = ""  # why the last process ended while a model was loaded ("" since a load)
        self._lost_watch: tuple[asyncio.AbstractEventLoop, Callable[[str], None]] | None = None
        self._quiet: set[int] = set()  # calls whose failure nobody is shown (a cache warm-up)
        self._start_child(spawned)

    @property
    def model(self) -> ModelInfo | None:
        """The loaded model, or None."""
        return self._model

    @property
    def lost(self) -> str:
        """Why the model went (its process ended), until a model loads again; "" otherwise. A
        front end says it where it would say "no model is loaded": the user sees why."""
        return self._lost

    def on_lost(self, callback: Callable[[str], None]) -> None:
        """Call `callback(why)` on this (the caller's) event loop when the process ends with a
        model loaded and no call waiting to report it: a model lost between replies is said
        at once, not at the next message."""
        self._lost_watch = (asyncio.get_running_loop(), callback)

    @property
    def setup(self) -> EngineSetup:
        """What the process was told to build (the engine it runs)."""
        return self._setup

    @property
    def pid(self) -> int | None:
        """The engine process's id while it runs (tests, the bench)."""
        child = self._child
        return child.process.pid if child is not None and child.process.poll() is None else None

    async def load(self, model: str, *, trust_remote_code: bool = False,
                   on_progress: ProgressCallback | None = None) -> ModelInfo:
        """As `EngineAPI.load`: the previous model stays until the new one is in."""
        previous, self._model = self._model, None
        try:
            info = await self._call("load", (model,), {"trust_remote_code": trust_remote_code}, on_progress)
        except BaseException:
            if self._child is not None and self._child.alive:
                self._model = previous
            raise
        assert isinstance(info, ModelInfo)
        self._model, self._lost = info, ""
        return info

    def preload(self, model: str, *, trust_remote_code: bool = False) -> None:
        """Begin loading `model` in the engine process now, as soon as its imports are done: the
        `load` of the same model that follows (the app's, after its first paint) joins it rather
        than starting then (`engine.process.preload`). A process takes it only before its first load."""
        self._send(("preload", model, trust_remote_code))

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """Start one turn now (the request is sent before this returns); leaving early stops it."""
        return self._stream("generate", request, TurnFinished)

    def preview(self, request: PreviewRequest) -> AsyncGenerator[PreviewEvent, None]:
        return self._stream("preview", request, PreviewFinished)

    async def score(self, request: ScoreRequest) -> Scored:
        result = await self._call("score", (request,))
        assert isinstance(result, Scored)
        return result

    async def probe(self, request: ProbeRequest) -> tuple[ProbeResult, ...]:
        result = await self._call("probe", (request,))
        assert isinstance(result, tuple)
        return result

    async def count_tokens(self, messages: Sequence[Message], thinking: bool | None = None) -> int:
        result = await self._call("count_tokens", (tuple(messages), thinking))
        assert isinstance(result, int)
        return result

    async def token_ids(self, text: str) -> tuple[int, ...]:
        result = await self._call("token_ids", (text,))
        assert isinstance(result, tuple)
        return result

    async def stages(self, request: StageRequest) -> StageView:
        result = await self._call("stages", (request,))
        assert isinstance(result, StageView)
        return result

    def prepare(self, messages: Sequence[Message], draft: str = "", thinking: bool | None = None,
                score_candidates: int | None = None) -> asyncio.Future[int]:
        """As in-process: returns at once; the future never fails (0 when nothing was warmed)."""
        loop = asyncio.get_running_loop()
        warmed: asyncio.Future[int] = loop.create_future()
        if self._closed or self._model is None:
            warmed.set_result(0)
            return warmed
        rid = next(self._ids)

        def deliver(frame: Any) -> None:
            self._unroute(rid)
            self._quiet.discard(rid)
            if not warmed.done():
                warmed.set_result(frame[2] if frame[0] == "done" and isinstance(frame[2], int) else 0)

        self._route(rid, loop, deliver)
        self._quiet.add(rid)
        if not self._send(("prepare", rid, tuple(messages), draft, thinking, score_candidates)):
            self._unroute(rid)
            self._quiet.discard(rid)
            warmed.set_result(0)
        return warmed

    def set_params(self, params: SamplingParams) -> None:
        """Running turns use `params` from their next sampled token (one frame away)."""
        self._send(("params", params))

    def cancel(self) -> None:
        self._send(("cancel",))

    async def close(self) -> None:
        """Ask the process to close (it frees the model and keeps its caches), wait at most
        `CLOSE_WAIT_S`, then kill it: quitting never waits on a stuck engine. Idempotent; a
        close that is itself cancelled (the app's own bound) still kills the process."""
        if self._closed:
            return
        self._closed = True
        self._model = None
        child = self._child
        if child is None:
            return
        try:
            if child.alive and child.send(encode(("close",))):
                await asyncio.to_thread(child.wait, CLOSE_WAIT_S)
        finally:
            child.kill()

    def _start_child(self, spawned: Spawned | None = None) -> "RunningProcess":
        process = (spawned or spawn(self._python)).take()
        child = RunningProcess(process, self._setup, self._arrived, self._died)
        self._child = child
        return child

    def _ensure_child(self) -> "RunningProcess":
        if self._closed:
            raise EngineError("The engine is closed.")
        with self._lock:
            child = self._child
            if child is None or not child.alive:
                child = self._start_child()  # a fresh process after a death: no model loaded
        return child

    def _send(self, item: object) -> bool:
        """Write one frame; False when there is no live process to take it."""
        child = self._child
        return bool(child is not None and child.alive and child.send(encode(item)))

    def _route(self, rid: int, loop: asyncio.AbstractEventLoop, deliver: Deliver) -> None:
        with self._lock:
            self._routes[rid] = (loop, deliver)

    def _unroute(self, rid: int) -> None:
        with self._lock:
            self._routes.pop(rid, None)

    def _arrived(self, frame: Any) -> None:
        """On the reader thread: hand an answer to the loop of the call that waits for it."""
        if not isinstance(frame, tuple) or len(frame) < 2 or not isinstance(frame[1], int):
            return
        with self._lock:
            route = self._routes.get(frame[1])
        if route is not None:
            _post(route[0], route[1], frame)

    def _died(self, child: "RunningProcess", why: str) -> None:
        """On the reader thread: the process ended; everything waiting on it gets `why`."""
        with self._lock:
            if child is not self._child:
                return
            routes, self._routes = self._routes, {}
        had_model, self._model = self._model is not None, None
        if had_model and not self._closed:
            self._lost = why
            if self._lost_watch is not None and not set(routes) - self._quiet:  # else a waiting call says it
                _post(*self._lost_watch, why)
        error = EngineError(why)
        for rid, (loop, deliver) in routes.items():
            _post(loop, deliver, ("fail", rid, error))

    async def _call(self, method: str, args: tuple[object, ...], kwargs: dict[str, object] | None = None,
                    on_progress: ProgressCallback | None = None) -> object:
        """One request with one answer; cancelling the awaiting task stops it in the process."""
        child = self._ensure_child()
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[object] = loop.create_future()
        rid = next(self._ids)

        def deliver(frame: Any) -> None:
            if frame[0] == "progress":
                if on_progress is not None:
                    on_progress(frame[2])
            elif not answer.done():
                if frame[0] == "done":
                    answer.set_result(frame[2])
                else:
                    answer.set_exception(_as_error(frame[2]))

        self._route(rid, loop, deliver)
        try:
            if not child.send(encode(("call", rid, method, args, kwargs or {}))):
                raise EngineError(child.why_gone())
            return await answer
        except asyncio.CancelledError:
            self._send(("stop", rid))
            raise
        finally:
            self._unroute(rid)

    def _stream(self, method: str, request: object, last: type) -> AsyncGenerator[Any, None]:
        """Send the request now; the generator relays its items until `last` (or a failure)."""
        try:
            child = self._ensure_child()
            loop = asyncio.get_running_loop()
        except (EngineError, RuntimeError) as exc:
            return _failing(exc if isinstance(exc, EngineError) else EngineError(str(exc)))
        rid = next(self._ids)
        frames: asyncio.Queue[Any] = asyncio.Queue()
        self._route(rid, loop, frames.put_nowait)
        if not child.send(encode(("stream", rid, method, request))):
            self._unroute(rid)
            return _failing(EngineError(child.why_gone()))
        return self._relay(rid, frames, last)

    async def _relay(self, rid: int, frames: asyncio.Queue[Any], last: type) -> AsyncGenerator[Any, None]:
        ended = False
        try:
            while True:
                kind, _, item = await frames.get()
                if kind == "item":
                    if isinstance(item, last):
                        ended = True
                    yield item
                    if ended:
                        return
                elif kind == "done":
                    ended = True
                    return
                else:
                    ended = True
                    raise _as_error(item)
        finally:
            self._unroute(rid)
            if not ended:
                self._send(("stop", rid))  # the reader left early: stop it there too


def _post(loop: asyncio.AbstractEventLoop, deliver: Deliver, frame: Any) -> None:
    try:
        loop.call_soon_threadsafe(deliver, frame)
    except RuntimeError:  # that loop is closed: nobody waits any more
        pass


def _as_error(item: object) -> BaseException:
    return item if isinstance(item, BaseException) else EngineError(f"The engine process sent {type(item).__name__}.")


async def _failing(error: EngineError) -> AsyncGenerator[Any, None]:
    """A stream that fails at once (errors stay on the iteration side, as in-process)."""
    raise error
    yield  # pragma: no cover - makes this an async generator
