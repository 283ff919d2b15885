"""The engine process: ``python -m engine.process``, started by `engine.process.client`.

It builds the engine its first frame describes (`engine.process.setup`), starts its thread at
once (the imports of MLX and mlx-lm then run while the app imports Textual, on the other core),
and serves the app's requests from standard input, answering on standard output. Each request
runs as the in-process engine runs it: this is the same `engine.local.client.Engine`, only
driven through frames. Anything a library prints goes to standard error (file descriptor 1 is
pointed there), never into the frames.

It ends when asked ("close"), or when its input ends: the app is gone, whatever way it went.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import threading
from functools import partial
from typing import Any, BinaryIO, Callable

from engine.core.api import EngineAPI
from engine.process.preload import Preload
from engine.process.wire import WireClosed, encode, portable, read_frame

CALLS = frozenset({"load", "score", "probe", "count_tokens", "token_ids", "stages"})  # coroutines, one result
STREAMS = frozenset({"generate", "preview"})  # async generators, many items
CLOSE_WAIT_S = 5.0  # the engine's own close waits 2 s for its thread; the rest is the exit's
GIL_SWITCH_S = 0.0005  # as the app's (tui.app.application.tune_for_streaming): the engine thread's
# per-token Python and this loop's relay hand the interpreter lock to each other every token


class Server:
    """Runs requests on `engine` and writes their answers as frames on `out`."""

    def __init__(self, engine: EngineAPI, out: BinaryIO) -> None:
        self.engine = engine
        self._out = out
        self._write = threading.Lock()  # frames from the loop and from progress callbacks
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._preload: Preload | None = None  # the first load, begun before the app asked
        self._load_asked = False  # a head start only before the app's first load
        self.closing = asyncio.Event()

    def send(self, item: object) -> None:
        data = encode(item)
        with self._write:
            self._out.write(data)
            self._out.flush()

    def dispatch(self, frame: Any) -> None:
        """One request, on the loop, in the order the app sent it: a turn is submitted before a
        "cancel" or "params" sent after it is applied (each submits at once, as in-process)."""
        kind = frame[0]
        if kind == "call" and frame[2] in CALLS:
            _, rid, method, args, kwargs = frame
            if method == "load":
                self._start(rid, self._answer(rid, self._load(rid, args, kwargs)))
            else:
                self._start(rid, self._answer(rid, getattr(self.engine, method)(*args, **kwargs)))
        elif kind == "stream" and frame[2] in STREAMS:
            _, rid, method, request = frame
            self._start(rid, self._relay(rid, getattr(self.engine, method)(request)))
        elif kind == "prepare":
            _, rid, messages, draft, thinking, score_candidates = frame
            self._start(rid, self._answer(rid, self.engine.prepare(messages, draft, thinking, score_candidates)))
        elif kind == "stop":
            task = self._tasks.get(frame[1])
            if task is not None:
                task.cancel()
        elif kind == "preload" and self._preload is None and not self._load_asked:
            _, model, trust_remote_code = frame
            self._preload = Preload(self.engine, model, bool(trust_remote_code))
        elif kind == "params":
            self.engine.set_params(frame[1])
        elif kind == "cancel":
            self.engine.cancel()
        elif kind == "close":
            self.closing.set()

    def _load(self, rid: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The app's load: the head start when it asks for the same model, else a load of its own."""
        def progress(progress: Any) -> None:
            self.send(("progress", rid, progress))
        self._load_asked = True
        preload, self._preload = self._preload, None
        if preload is not None:
            if preload.matches(args, kwargs):
                return preload.join(progress)
            preload.abandon()
        return self.engine.load(*args, **{**kwargs, "on_progress": progress})

    def _start(self, rid: int, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks[rid] = task
        task.add_done_callback(partial(self._forget, rid))

    def _forget(self, rid: int, _task: object) -> None:
        self._tasks.pop(rid, None)

    async def _answer(self, rid: int, awaitable: Any) -> None:
        try:
            result = await awaitable
        except asyncio.CancelledError:
            return  # the app stopped waiting: it wants no answer
        except BaseException as exc:  # noqa: BLE001 - every failure is the caller's to see
            self.send(("fail", rid, portable(exc)))
            return
        self.send(("done", rid, result))

    async def _relay(self, rid: int, events: Any) -> None:
        try:
            async for event in events:
                self.send(("item", rid, event))
        except asyncio.CancelledError:
            return
        except BaseException as exc:  # noqa: BLE001
            self.send(("fail", rid, portable(exc)))
            return
        finally:
            await events.aclose()  # leaving early stops the turn, as it does in-process
        self.send(("done", rid, None))


async def serve(engine: EngineAPI, frames: BinaryIO, out: BinaryIO) -> None:
    """Serve until "close" or the end of `frames`, then close the engine (bounded) and say so."""
    loop = asyncio.get_running_loop()
    server = Server(engine, out)
    reader = threading.Thread(target=_read_all, args=(frames, loop, server.dispatch, server.closing.set),
                              name="logitscope-engine-frames", daemon=True)
    reader.start()
    await server.closing.wait()
    try:
        await asyncio.wait_for(engine.close(), CLOSE_WAIT_S)
    except BaseException:  # noqa: BLE001 - closing is best effort; the process ends either way
        pass
    try:
        server.send(("closed",))
    except OSError:  # the app is gone
        pass


def _read_all(frames: BinaryIO, loop: asyncio.AbstractEventLoop, dispatch: Callable[[Any], None],
              ended: Callable[[], None]) -> None:
    """The reader thread: every frame onto the loop, in order; the end of input closes."""
    try:
        while True:
            loop.call_soon_threadsafe(dispatch, read_frame(frames))
    except (WireClosed, OSError, EOFError, ValueError):
        pass
    except RuntimeError:  # the loop is closed: the process is ending
        return
    try:
        loop.call_soon_threadsafe(ended)
    except RuntimeError:
        pass


def main() -> int:
    """The process's body: frames on fd 0 and the saved fd 1, everything else printed to fd 2."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a library's print lands in the app's log of this process, not in a frame
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C in the terminal is the app's to handle
    frames = os.fdopen(0, "rb")
    try:
        setup = read_frame(frames)
    except WireClosed:
        return 0
    gc.set_threshold(10_000, 10, 10)  # as the app: a stream allocates many small objects
    sys.setswitchinterval(GIL_SWITCH_S)
    engine = setup.build()  # type: ignore[attr-defined]
    start = getattr(engine, "start", None)
    if start is not None:
        start()  # the imports begin now
    asyncio.run(serve(engine, frames, out))
    out.flush()
    os._exit(0)  # a stuck engine thread (a daemon) must not hold the exit


if __name__ == "__main__":
    sys.exit(main())
