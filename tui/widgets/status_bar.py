"""One line of facts: model, context, cache reuse and speed of the last turn."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from tui.model.conversation import TurnStats


class StatusBar(Widget):
    """Set `model`, `state`, `stats`; it renders itself."""

    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; color: $text; padding: 0 1; }
    """

    model: reactive[str] = reactive("no model")
    state: reactive[str] = reactive("")
    stats: reactive[TurnStats | None] = reactive(None)
    context_limit: reactive[int] = reactive(0)

    def render(self) -> Text:
        text = Text()
        text.append(self.model, style="bold")
        if self.state:
            text.append(f"  {self.state}", style="italic")
        s = self.stats
        limit = s.context_limit if s else self.context_limit
        used = s.context_used if s else 0
        text.append(f"  ctx {used}/{limit or '?'}")
        if s is not None:
            text.append(f"  cache {s.reused_tokens}/{s.prompt_tokens}")
            text.append(f"  ttft {s.ttft_s * 1000:.0f} ms")
            text.append(f"  prefill {s.prefill_tps:.0f} tok/s  decode {s.decode_tps:.1f} tok/s")
        return text
