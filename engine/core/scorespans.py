"""Where each message's own text sits among the tokens a model read (`engine.core.api.MessageScore`).

Why by characters: a chat template wraps every message in text of its own (role headers, markers,
a default system prompt), and a reply enters the prompt as its exact ids, so no rule about ids
says which tokens hold which message. The text does: the tokens' texts joined are the prompt's
text, in which each message's text appears in order. A message's span is the tokens whose
characters overlap its text, found after the previous message's span (or, for a template that
trims a message, its text without the surrounding whitespace). A message the template does not
show verbatim gets an empty span at that point.

Pure Python on plain strings: every engine can use it.
"""

from __future__ import annotations

import bisect
from typing import Sequence


def message_spans(messages: Sequence[str], token_texts: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) token positions per message text; `token_texts[i]` is the text token i adds."""
    starts: list[int] = []  # character offset where each token's text starts
    joined: list[str] = []
    offset = 0
    for text in token_texts:
        starts.append(offset)
        joined.append(text)
        offset += len(text)
    whole = "".join(joined)
    ends = [start + len(text) for start, text in zip(starts, token_texts)]
    spans: list[tuple[int, int]] = []
    char, token = 0, 0
    for text in messages:
        found = _find(whole, text, char)
        if found is None:
            spans.append((token, token))
            continue
        low, high = found
        first = bisect.bisect_right(ends, low)  # the first token ending after the text starts
        last = bisect.bisect_left(starts, high)  # one past the last token starting before it ends
        first, last = max(first, token), max(last, first)
        spans.append((first, last))
        char, token = high, last
    return spans


def _find(whole: str, text: str, after: int) -> tuple[int, int] | None:
    """The characters of `text` in `whole` from `after` on (or of its stripped form)."""
    for probe in (text, text.strip()):
        if probe:
            at = whole.find(probe, after)
            if at >= 0:
                return at, at + len(probe)
    return None
