"""Waiting on a server without outwaiting the user: every read is raced against an event (a
cancel, new parameters), so a stop closes the connection at once instead of after the next token."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


async def until(objects: AsyncIterator[dict[str, Any]], stop: asyncio.Event) -> AsyncIterator[dict[str, Any]]:
    """The stream's objects until it ends or `stop` is set (checked while waiting, not after)."""
    iterator = objects.__aiter__()
    while not stop.is_set():
        item = await or_stopped(iterator.__anext__(), stop)
        if item is None:
            return
        yield item


async def or_stopped(awaitable: Awaitable[T], stop: asyncio.Event) -> T | None:
    """The awaitable's result, or None once `stop` is set first (the awaitable is then cancelled,
    which closes its request) or the stream ended (StopAsyncIteration)."""
    work = asyncio.ensure_future(awaitable)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({work, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if not work.done():
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        return None
    try:
        return work.result()
    except StopAsyncIteration:
        return None
