"""Server-sent events, as OpenAI-compatible servers stream them: pure parsing, no I/O.

Why our own few lines rather than a library: the three servers we speak to send only ``data:``
lines (a JSON object each, then ``data: [DONE]``) and ``:`` comment lines (mlx_lm.server's
keep-alive while a long prompt is read); anything else on the wire is a server bug, which must
become one clear line rather than a hang or a traceback.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from engine.core.api import EngineError

DONE = "[DONE]"
MAX_LINE = 4 * 2**20  # one event; a token with its top-100 is a few KiB, so this is a broken server


def parse_data_line(line: str) -> dict[str, Any] | None:
    """The JSON object one SSE line carries; None for blank, comment, ``event:``/``id:`` lines and
    for ``[DONE]`` (the caller sees the end by the stream ending). Raises EngineError on a
    ``data:`` line that is not a JSON object."""
    line = line.rstrip("\r\n")
    if not line.startswith("data:"):
        return None
    payload = line[5:].strip()
    if payload == DONE or not payload:
        return None
    try:
        value = json.loads(payload)
    except ValueError:
        raise EngineError(f"The server sent a stream line that is not JSON: {payload[:60]!r}") from None
    if not isinstance(value, dict):
        raise EngineError(f"The server sent a stream line that is not a JSON object: {payload[:60]!r}")
    return value


async def lines_of(chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """The stream's lines (UTF-8), never holding more than `MAX_LINE` bytes of one: a server that
    sends endless bytes without a newline fails here instead of filling the memory."""
    pending = b""
    async for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line.decode("utf-8", "replace")
        if len(pending) > MAX_LINE:
            raise EngineError(f"The server sent a stream line of over {MAX_LINE // 2**20} MiB: not a token event.")
    if pending:
        yield pending.decode("utf-8", "replace")


async def data_objects(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """Every JSON object of a stream, in order, stopping at ``data: [DONE]``."""
    async for line in lines:
        if line.rstrip("\r\n").startswith("data:") and line[5:].strip() == DONE:
            return
        value = parse_data_line(line)
        if value is not None:
            yield value
