"""The previews panel: under the candidates, where each of the top ones would lead.

Dumb on purpose: the screen sets `rows` (candidate text, preview text, finished) as previews
stream in. The texts are the model's: shown as data (`visible`), never as markup.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from tui.app.safe_text import printable
from tui.app.widgets.render import visible

PreviewLine = tuple[str, str, bool]  # candidate text, the preview so far, whether it is finished
CANDIDATE_CHARS = 10


class PreviewsPanel(Widget):
    """One line per previewed candidate: ``candidate → continuation…``; hidden while empty, and
    in the narrow layouts (`tui.app.screens.layout`: the row under the chat has no room for it)."""

    DEFAULT_CSS = """
    PreviewsPanel { height: auto; max-height: 8; border: round $border-blurred; padding: 0 1; display: none; }
    PreviewsPanel.-shown { display: block; }
    """

    rows: reactive[tuple[PreviewLine, ...]] = reactive((), layout=True)
    note: reactive[str] = reactive("")

    def on_mount(self) -> None:
        self.border_title = "what if"

    def watch_rows(self, rows: tuple[PreviewLine, ...]) -> None:
        self.set_class(bool(rows), "-shown")

    def render(self) -> RenderableType:
        """One line per candidate, cut to the panel's width (a preview is a glance, not a reply)."""
        lines = []
        for number, (candidate, preview, done) in enumerate(self.rows, 1):
            line = Text(f"{number} ", style="dim")
            line.append(visible(candidate)[:CANDIDATE_CHARS], style="bold")
            line.append(" → ", style="dim")
            line.append(one_line(preview), style="" if done else "italic")
            if not done:
                line.append("…", style="dim")
            line.truncate(max(1, self.size.width), overflow="ellipsis")
            lines.append(line)
        return Text("\n").join(lines)

def one_line(text: str) -> str:
    """A continuation on one line: control characters made visible, line breaks as ``↵``."""
    return printable(text).replace("\r\n", "↵").replace("\n", "↵").replace("\t", " ")
