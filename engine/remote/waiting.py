"""Waiting on a server without outwaiting the user: every read is raced against an event (a
cancel, new parameters), so a stop closes the connection at once instead of after the next token."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from engine.core.api import EngineError

T = TypeVar("T")


@dataclass(frozen=True)
class Deadline:
    """When a whole turn must be over, whatever the server does, and what to say when it is not.

    Why a total deadline and not only the read timeout: the timeout covers silence, and an SSE
    keep-alive comment (``: ping``) is not silence. A server that sends one every few seconds and
    never a token kept a turn (and `logitscope run`) going forever.
    """

    at: float  # time.monotonic()
    message: str

    @classmethod
    def after(cls, seconds: float, message: str) -> "Deadline":
        return cls(time.monotonic() + seconds, message)

    def left(self) -> float:
        return max(0.0, self.at - time.monotonic())


async def until(objects: AsyncIterator[dict[str, Any]], stop: asyncio.Event,
                deadline: Deadline | None = None) -> AsyncIterator[dict[str, Any]]:
    """The stream's objects until it ends or `stop` is set (checked while waiting, not after);
    EngineError once `deadline` passes."""
    iterator = objects.__aiter__()
    while not stop.is_set():
        item = await or_stopped(iterator.__anext__(), stop, deadline)
        if item is None:
            return
        yield item


async def or_stopped(awaitable: Awaitable[T], stop: asyncio.Event, deadline: Deadline | None = None) -> T | None:
    """The awaitable's result, or None once `stop` is set first (the awaitable is then cancelled,
    which closes its request) or the stream ended (StopAsyncIteration). EngineError (the
    deadline's message) when `deadline` passes first; the awaitable is cancelled then too."""
    work = asyncio.ensure_future(awaitable)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({work, stopped}, return_when=asyncio.FIRST_COMPLETED,
                           timeout=deadline.left() if deadline is not None else None)
    finally:
        stopped.cancel()
    if not work.done() and not stop.is_set():  # the deadline passed
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        assert deadline is not None
        raise EngineError(deadline.message)
    if not work.done():
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        return None
    try:
        return work.result()
    except StopAsyncIteration:
        return None
