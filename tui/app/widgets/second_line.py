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
    """The line's text, in short lines that fit the side panel (plain: model names and tokens are
    data, never markup). "A / B": the loaded model's number, then the second one's."""
    head = f"2nd model: {printable(name)}\nppl {_ppl(perplexity[0])} / {_ppl(perplexity[1])} (this / 2nd)"
    if busy:
        return f"{head}\nreading the chat…"
    if span is None:
        return f"{head}\ne / E: where first choices differ"
    what = "token" if len(span.a) == 1 and len(span.b) == 1 else f"span {len(span.a)}/{len(span.b)} tok"
    lines = [head, f"{what}: p {_p(span.a_logprob)} / {_p(span.b_logprob)}  Δ {span.log_ratio:+.2f}"]
    if span.a_top is not None and span.b_top is not None:
        lines.append(f"1st choice: {printable(span.a_top)!r} / {printable(span.b_top)!r}"
                     + ("  ≠" if span.tops_differ else ""))
    if not span.exact:
        lines.append("the texts part here: the rest is compared whole")
    return "\n".join(lines)


class SecondLine(Static):
    """Hidden until a second model is open."""

    DEFAULT_CSS = """
    SecondLine { height: auto; padding: 0 1; border-top: solid $panel-lighten-2; }
    SecondLine.-hidden { display: none; }
    """

    def __init__(self) -> None:
        super().__init__("", markup=False, classes="-hidden")
