"""Two models reading the same text, token by token: aligned by characters, compared per span.

Why characters: two models rarely share a tokenizer, so "token 7" means different text in each.
What both do share is the text. Each side's tokens are laid end to end (their `piece`s, the text
each token alone decodes to, with white space left out: tokenizers mark spaces differently, one
in front of a word, another dropping the first one), which gives every token a range of the
text's other characters; a boundary both sides have cuts the text into spans, and each span holds whole tokens of both sides. Where the two
tokenizers agree (the usual case for words), a span is one token on each side; where one splits
a word the other keeps whole, the span is that word, with two tokens on one side and one on the
other, and the numbers compare the span (the product of its tokens' probabilities on each side).

The rule when the two texts differ (a tokenizer that normalises spaces, a byte-level piece shown
as a replacement character): the texts are compared up to their first difference; from there on
the rest of both is one span, marked `exact=False` (its numbers are the rest's, not a token's).

Nothing here knows about engines: the caller hands in each side's `TokenEvent`s for the same
message (`EngineAPI.score` gives them for text a model reads; a reply's own tokens for what it
wrote), and gets `Span`s back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from engine.core.api import TokenEvent


@dataclass(frozen=True)
class Span:
    """One stretch of the text, with whole tokens of both sides in it."""

    start: int  # offset among the text's characters other than white space
    end: int
    a: tuple[int, ...]  # indexes into side A's tokens
    b: tuple[int, ...]  # indexes into side B's tokens
    a_logprob: float  # log of the span's probability under A (sum over its tokens)
    b_logprob: float  # ... under B
    a_top: str | None  # A's most likely token at the span's first position (its text), if listed
    b_top: str | None  # B's
    exact: bool  # False: the two texts differ here; the span is the rest of both

    @property
    def log_ratio(self) -> float:
        """log p_A - log p_B: positive where A found the text likelier than B did (nats)."""
        if self.a_logprob == self.b_logprob:
            return 0.0  # also both -inf: no disagreement to show
        return self.a_logprob - self.b_logprob

    @property
    def tops_differ(self) -> bool:
        """Whether the two models' first choices at the span's start differ (both must be known:
        the comparison is of the leading whitespace-stripped text, as tokenizers mark spaces
        differently)."""
        return self.a_top is not None and self.b_top is not None and self.a_top.strip() != self.b_top.strip()


def align(a: Sequence[TokenEvent], b: Sequence[TokenEvent]) -> list[Span]:
    """The spans of the text both sides read (see the module docstring for the rule)."""
    a_ends, b_ends = _ends(a), _ends(b)
    a_text, b_text = "".join(_visible(t.piece) for t in a), "".join(_visible(t.piece) for t in b)
    same = _common_prefix(a_text, b_text)
    spans: list[Span] = []
    i = j = start = 0
    while i < len(a) and j < len(b):
        next_i, next_j = i + 1, j + 1
        while a_ends[next_i - 1] != b_ends[next_j - 1]:  # the side that is behind takes another token
            if a_ends[next_i - 1] < b_ends[next_j - 1] and next_i < len(a):
                next_i += 1
            elif b_ends[next_j - 1] < a_ends[next_i - 1] and next_j < len(b):
                next_j += 1
            else:
                break
        end = a_ends[next_i - 1]
        if end != b_ends[next_j - 1] or end > same:
            break  # no common boundary within the text both have: the rest is one span
        spans.append(_span(a, b, range(i, next_i), range(j, next_j), start, end, exact=True))
        i, j, start = next_i, next_j, end
    if i < len(a) or j < len(b):  # exact only when all that is left is white space on both sides
        spans.append(_span(a, b, range(i, len(a)), range(j, len(b)), start, len(a_text),
                           exact=a_text[start:] == b_text[start:] == ""))
    return spans


def _visible(piece: str) -> str:
    return "".join(piece.split())


def _ends(tokens: Sequence[TokenEvent]) -> list[int]:
    """Each token's end offset when the pieces are laid end to end."""
    out, at = [], 0
    for token in tokens:
        at += len(_visible(token.piece))
        out.append(at)
    return out


def _common_prefix(x: str, y: str) -> int:
    n = min(len(x), len(y))
    for k in range(n):
        if x[k] != y[k]:
            return k
    return n


def _span(a: Sequence[TokenEvent], b: Sequence[TokenEvent], ai: range, bi: range, start: int, end: int,
          exact: bool) -> Span:
    return Span(start, end, tuple(ai), tuple(bi), _sum(a, ai), _sum(b, bi), _top(a, ai), _top(b, bi), exact)


def _sum(tokens: Sequence[TokenEvent], which: range) -> float:
    return math.fsum(tokens[k].logprob for k in which) if len(which) else 0.0


def _top(tokens: Sequence[TokenEvent], which: range) -> str | None:
    """The text of the most likely candidate at the span's first token (None: none listed)."""
    if not len(which) or not tokens[which[0]].candidates:
        return None
    best = max(tokens[which[0]].candidates, key=lambda c: c.logprob)
    return best.text
