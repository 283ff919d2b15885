"""The first load, begun in the engine process before the app asks for it (#30.8).

Why: the app asks for its model after its first paint, and on a busy 2-core machine that paint
(Textual's imports, the first layout) ends later than the engine process's own imports: the
process then sat idle, and the app was ready that much after `mlx_lm.chat`. The app knows which
model it will load before it imports Textual (the command line, else the config's default), so
it says so in the frame after the set-up; the process starts that load as soon as its engine
exists. When the app's own "load" arrives for the same model, it joins the load already running:
the progress said so far is replayed, the rest follows, and the answer is that load's. A load of
another model (not what the app does today, but nothing relies on it) cancels the head start and
runs as it would have.

Everything here runs on the process's event loop (the engine calls progress callbacks there).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from engine.core.api import EngineAPI, LoadProgress, ModelInfo

Progress = Callable[[LoadProgress], None]


class Preload:
    """One load started early; `join` hands it to the request that asks for the same model."""

    def __init__(self, engine: EngineAPI, model: str, trust_remote_code: bool) -> None:
        self.model = model
        self.trust_remote_code = trust_remote_code
        self._said: list[LoadProgress] = []
        self._listener: Progress | None = None
        self.task: asyncio.Task[ModelInfo] = asyncio.get_running_loop().create_task(
            engine.load(model, trust_remote_code=trust_remote_code, on_progress=self._progress))
        self.task.add_done_callback(_retrieve)

    def matches(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether a "load" call with these arguments asks for this very load."""
        return tuple(args) == (self.model,) and bool(kwargs.get("trust_remote_code", False)) == self.trust_remote_code

    def join(self, listener: Progress) -> "asyncio.Task[ModelInfo]":
        """The running load, its progress so far replayed to `listener` and the rest sent there."""
        for progress in self._said:
            listener(progress)
        self._said.clear()
        self._listener = listener
        return self.task

    def abandon(self) -> None:
        """Another load was asked for: this one is not wanted (its model, if it loads, is replaced)."""
        self.task.cancel()

    def _progress(self, progress: LoadProgress) -> None:
        if self._listener is not None:
            self._listener(progress)
        else:
            self._said.append(progress)


def _retrieve(task: "asyncio.Task[ModelInfo]") -> None:
    """A head start that failed or was cancelled with nobody joined is not an unhandled error
    (the app's own load reports the failure when it joins)."""
    if not task.cancelled():
        task.exception()
