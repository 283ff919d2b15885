"""What every helper of the chat screen asks of it, written once.

The chat screen's behaviour lives in helpers (`chat_actions`, `chat_params`, `chat_stages`...),
each taking the screen through a Protocol of what it uses, so the helper and the screen's module
do not import each other. The Textual calls most of them use are here; each helper's own host
adds the screen's attributes it needs (`class StageHost(ScreenHost, Protocol)`).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from textual.app import App
from textual.notifications import SeverityLevel
from textual.widget import Widget

W = TypeVar("W", bound=Widget)


class ScreenHost(Protocol):
    """Textual's side of the chat screen, as its helpers call it."""

    @property
    def app(self) -> App[Any]: ...

    def query_one(self, selector: type[W]) -> W: ...

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...

    def run_worker(self, work: Any, name: str | None = "", group: str = "default",
                   description: str = "", exit_on_error: bool = True, start: bool = True,
                   exclusive: bool = False, thread: bool = False) -> Any: ...
