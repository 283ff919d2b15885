"""The second model's line in the side panel: which model reads the chat beside the first, the
chat's perplexity under both, and for the token under the cursor its probability under both,
the log-ratio, and each model's first choice there (#33, item 5)."""

from __future__ import annotations

import math

from textual.widgets import Static

from engine.core.compare import Span
from tui.app.safe_text import printable


def _p(logprob: float) -> str:
    if logprob == -math.inf:
        return "0"
    p = math.exp(logprob)
    return f"{p * 100:.3g}%" if p >= 0.001 else f"{p:.1e}"


def _ppl(value: float | None) -> str:
    return "?" if value is None else "inf" if math.isinf(value) else f"{value:.3g}"


def describe(name: str, perplexity: tuple[float | None, float | None], span: Span | None, busy: bool) -> str:
    """The line's text (plain: model names and tokens are data, never markup)."""
    head = f"2nd model: {printable(name)}  ·  ppl {_ppl(perplexity[0])} / {_ppl(perplexity[1])}"
    if busy:
        return f"{head}\n  reading the chat…"
    if span is None:
        return f"{head}\n  d / D: where their first choices differ"
    what = "this token" if len(span.a) == 1 and len(span.b) == 1 else \
        f"this span ({len(span.a)} token{'s' if len(span.a) != 1 else ''} here, {len(span.b)} there)"
    tops = ""
    if span.a_top is not None and span.b_top is not None:
        tops = f"\n  first choice: {printable(span.a_top)!r} / {printable(span.b_top)!r}" + \
            ("  (they differ)" if span.tops_differ else "")
    inexact = "" if span.exact else "\n  the two texts part here: the rest is compared whole"
    return (f"{head}\n  {what}: p {_p(span.a_logprob)} / {_p(span.b_logprob)}, "
            f"log-ratio {span.log_ratio:+.2f}{tops}{inexact}")


class SecondLine(Static):
    """Hidden until a second model is open."""

    DEFAULT_CSS = """
    SecondLine { height: auto; padding: 0 1; border-top: solid $panel-lighten-2; }
    SecondLine.-hidden { display: none; }
    """

    def __init__(self) -> None:
        super().__init__("", markup=False, classes="-hidden")
