"""Where each message sits among the tokens a model read (`engine.core.api.MessageScore`).

Why a search: a chat template wraps every message in text of its own (role headers, markers, a
default system prompt), so no rule about positions says which tokens hold which message. Two
things do, taken in the messages' order, each search starting after the previous message's span:

- a reply that carries its exact ids (`Message.token_ids`) entered the prompt as those very ids:
  its span is where they occur;
- any other message's text is found among the tokens' bytes joined (the prompt's own bytes, a
  character split over byte tokens included), as UTF-8, or without its surrounding whitespace
  for a template that trims it; its span is the tokens whose bytes overlap it.

A message not found (a template that rewrites its text) gets an empty span where the search was.
Pure Python on plain values: every engine can use it.
"""

from __future__ import annotations

import bisect
from typing import Sequence, Union

Wanted = Union[str, Sequence[int]]  # a message's text, or its exact ids


def message_spans(messages: Sequence[Wanted], ids: Sequence[int], token_bytes: Sequence[bytes]
                  ) -> list[tuple[int, int]]:
    """(start, end) token positions per message; `token_bytes[i]` holds the bytes of `ids[i]`."""
    starts, offset = [], 0
    for piece in token_bytes:
        starts.append(offset)
        offset += len(piece)
    ends = [start + len(piece) for start, piece in zip(starts, token_bytes)]
    whole = b"".join(token_bytes)
    spans: list[tuple[int, int]] = []
    token = 0
    for wanted in messages:
        span = (_find_ids(ids, list(wanted), token) if not isinstance(wanted, str)
                else _find_text(whole, wanted, starts[token] if token < len(starts) else len(whole), starts, ends))
        if span is None or span[0] < token:
            spans.append((token, token))
            continue
        spans.append(span)
        token = span[1]
    return spans


def _find_ids(ids: Sequence[int], wanted: list[int], after: int) -> tuple[int, int] | None:
    if not wanted:
        return None
    for at in range(after, len(ids) - len(wanted) + 1):
        if ids[at] == wanted[0] and list(ids[at:at + len(wanted)]) == wanted:
            return at, at + len(wanted)
    return None


def _find_text(whole: bytes, text: str, after: int, starts: list[int], ends: list[int]) -> tuple[int, int] | None:
    for probe in (text, text.strip()):
        raw = probe.encode("utf-8", "surrogatepass")
        if not raw:
            continue
        at = whole.find(raw, after)
        if at >= 0:
            first = bisect.bisect_right(ends, at)  # the first token ending after the text starts
            last = bisect.bisect_left(starts, at + len(raw))  # one past the last token starting inside it
            return first, max(last, first)
    return None
