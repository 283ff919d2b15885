"""One line of facts: model, compute dtype and BLAS, context, cache reuse and speed of the last turn."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from engine.core.api import ModelInfo
from engine.core.chat.conversation import TurnStats
from tui.app.safe_text import printable
from tui.app.widgets.user_view import perplexity_text

NO_MODEL = "no model loaded"


def compute_label(info: ModelInfo) -> str:
    """"float32 · OpenBLAS": what the numbers are computed in and with, short enough for one line.

    The BLAS detail in parentheses is dropped (OpenBLAS's thread count matters in a benchmark
    report, not in a status bar that also has to fit the model name and the speed), except
    llama.cpp's thread count: it is chosen by measurement, per file and again on the user's own
    replies (#31.1), and the decode speed beside it means little without it.
    """
    blas, _, detail = info.blas.partition(" (")
    blas = blas.strip()
    if blas == "llama.cpp" and detail:
        blas = f"{blas} {detail.split(',')[0].rstrip(')').strip()}"
    return " · ".join(part for part in (info.dtype, blas) if part)


def fit_name(name: str, width: int, shortest: int = 12) -> str:
    """`name` in at most max(`width`, `shortest`) cells, cut in the middle ("mlx-community/Qw…-4bit"),
    since both the organisation and the end of a model name (size, quantization) tell models apart."""
    width = max(width, shortest)
    if len(name) <= width:
        return name
    head = (width - 1) // 2
    return f"{name[:head]}…{name[len(name) - (width - 1 - head):]}"


class StatusBar(Widget):
    """Set `model`, `compute`, `state`, `stats`; it renders itself."""

    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; color: $text; padding: 0 1; }
    """

    model: reactive[str] = reactive("starting…")  # until the first load says which model
    compute: reactive[str] = reactive("")  # see `compute_label`
    state: reactive[str] = reactive("")
    stats: reactive[TurnStats | None] = reactive(None)
    context_limit: reactive[int] = reactive(0)
    context_used: reactive[int | None] = reactive(None)  # measured since the last turn's stats
    thinking_switch: reactive[bool] = reactive(False)  # the model's template can switch thinking
    thinking: reactive[bool | None] = reactive(None)  # the next replies' switch (None: the template's default)
    past_thinking: reactive[str] = reactive("")  # how earlier thinking enters prompts, and its cost
    perplexity: reactive[float | None] = reactive(None)  # the whole chat's, read back (#33.3)
    _info: ModelInfo | None = None  # the loaded model, as its load described it

    def watch_stats(self) -> None:
        self.context_used = None  # a finished turn's own count is the newest

    def render(self) -> Text:
        """The model's name and the load progress come from folders and hubs: shown defused.
        When the line is short the least useful facts go first, whole (the prefill speed, then
        the other speeds, ...), then the name is cut in its middle."""
        model = printable(self.model)
        facts = self._facts()
        width = self.content_size.width or 10_000
        while len(model) + sum(len(t) for t, _s, _r in facts) > width and any(r for _t, _s, r in facts):
            worst = max(r for _t, _s, r in facts)
            facts.remove(next(f for f in reversed(facts) if f[2] == worst))
        text = Text()
        if model:
            text.append(fit_name(model, width - sum(len(t) for t, _s, _r in facts)), style="bold")
        for part, style, _rank in facts:
            text.append(part, style=style)
        return text[2:] if not model and text.plain.startswith("  ") else text

    def _facts(self) -> list[tuple[str, str, int]]:
        """Everything after the model name, as (text, style, rank): rank 0 always stays, higher
        ranks give way first when the line is short."""
        facts: list[tuple[str, str, int]] = []
        if self.compute:
            facts.append((f"  {self.compute}", "dim", 1))
        if self.state:
            facts.append((f"  {printable(self.state)}", "italic", 0))
        if self.thinking_switch:  # only where it does something: most models have no such switch
            facts.append((f"  think {({None: 'auto', True: 'on', False: 'off'})[self.thinking]}", "", 1))
        if self.past_thinking:
            facts.append((f"  {printable(self.past_thinking)}", "", 1))
        s = self.stats
        limit = s.context_limit if s else self.context_limit
        used = self.context_used if self.context_used is not None else s.context_used if s else 0
        if limit:  # no model, no context: "ctx 0/?" said nothing
            facts.append((f"  ctx {used}/{limit}", "", 0))
        if self.perplexity is not None:
            facts.append((f"  chat {perplexity_text(self.perplexity)}", "", 1))
        if s is not None:
            facts.append((f"  reused {s.reused_tokens} of {s.prompt_tokens}", "", 1))  # prompt tokens from the cache
            facts.append((f"  ttft {s.ttft_s * 1000:.0f} ms", "", 2))
            facts.append((f"  prefill {s.prefill_tps:.0f} tok/s", "", 3))
            facts.append((f"  decode {s.decode_tps:.1f} tok/s", "", 2))
        return facts

    def show_model(self, info: ModelInfo) -> None:
        """A model is loaded and ready."""
        self._info = info
        self.model, self.compute, self.state = info.name, compute_label(info), "ready"
        self.context_limit, self.thinking_switch = info.context_limit, info.supports_thinking

    def show_compute(self, blas: str) -> None:
        """What computes the turns changed since the load (`TurnFinished.compute`)."""
        self._info = replace(self._info, blas=blas) if self._info is not None else None
        if self._info is not None:
            self.compute = compute_label(self._info)

    def show_loading(self, spec: str) -> None:
        """A load began ("loading demo…"): the old model is gone (the engine dropped it), so are
        its numbers."""
        self.model, self.compute, self.context_limit, self.stats, self.state = "", "", 0, None, f"loading {spec}…"
        self.perplexity = None
        self.thinking_switch = False

    def show_no_model(self) -> None:
        """A load failed: nothing is loaded now."""
        self.model, self.compute, self.context_limit, self.stats, self.state = NO_MODEL, "", 0, None, ""
        self.thinking_switch = False
