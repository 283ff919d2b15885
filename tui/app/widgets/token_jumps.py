"""Jumps of the token cursor to the next / previous token that passes a test (an unlikely
token: n / N; a fork: f / F), across the messages of the path shown.

Pure functions over the path's token lists, so the search is tested without a screen and the
transcript only turns the answer into a cursor move or a one-line note.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.core.api import TokenEvent

Tokens = Sequence[TokenEvent]


def find_token(lists: Sequence[Tokens], start: tuple[int, int] | None, step: int,
               hit: Callable[[TokenEvent], bool]) -> tuple[int, int] | None:
    """(list, index) of the first token after (`step` 1) or before (-1) `start` that `hit`
    accepts, going on into the following (preceding) lists; with no `start`, from the first
    token of the first list (the last of the last). None: there is none."""
    if not lists:
        return None
    if start is None:
        at = 0 if step > 0 else len(lists) - 1
        index = 0 if step > 0 else len(lists[at]) - 1
    else:
        at, index = start[0], start[1] + step
    while 0 <= at < len(lists):
        tokens = lists[at]
        while 0 <= index < len(tokens):
            if hit(tokens[index]):
                return at, index
            index += step
        at += step
        if 0 <= at < len(lists):
            index = 0 if step > 0 else len(lists[at]) - 1
    return None
