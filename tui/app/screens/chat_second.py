"""The chat screen's second model (#33, item 5): open and close it, have it read the chat when
the chat rests, and show what it found: a line in the side panel for the token under the
cursor, the heatmap by disagreement (F3), e / E to where the two models' first choices differ.

A typed helper the screen owns (as `ScopeActions` is), so the screen only forwards events.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from engine.core.api import EngineAPI, EngineError
from engine.core.chat.conversation import Node
from engine.core.compare import Span
from tui.app.second_reader import Comparison, SecondReader
from tui.app.widgets.second_line import SecondLine, describe
from tui.app.widgets.transcript import Transcript

if TYPE_CHECKING:
    from engine.core.settings import Config
    from tui.app.controller import ChatController


class SecondHost(Protocol):
    """What the helper needs of the chat screen (a Protocol, so the screen's module and this one
    do not import each other)."""

    controller: "ChatController"
    second_engine_factory: Callable[[], EngineAPI]
    is_mounted: bool

    def query_one(self, selector: Any, expect_type: Any = None) -> Any: ...
    def query(self, selector: Any = None) -> Any: ...
    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...
    def second_changed(self) -> None: ...


def second_engine_factory(first: EngineAPI, config: "Config") -> Callable[[], EngineAPI]:
    """How a second engine is made: beside the scripted double another one (tests, screenshots),
    else the local engine for models on this machine (MLX folders and GGUF files), without the
    KV caches on disk (the second model only reads)."""
    from engine.scripted import ScriptedEngine

    if isinstance(first, ScriptedEngine):
        return ScriptedEngine
    from engine.factory import local_engine

    return lambda: local_engine(config.model)


class SecondModelActions:
    """Owns the `SecondReader` and its latest `Comparison` for one chat screen."""

    def __init__(self, screen: SecondHost) -> None:
        self.screen = screen
        self.reader = SecondReader(lambda: screen.second_engine_factory())
        self.comparison: Comparison | None = None
        self.ratios: dict[int, float] = {}  # id(shown token) -> |log-ratio| of its span
        self._spans: dict[int, Span] = {}  # id(shown token) -> its span
        self._task: asyncio.Task[None] | None = None
        self._cursor: tuple[Node | None, int | None] = (None, None)

    @property
    def open(self) -> bool:
        return self.reader.engine is not None

    # --- opening and closing

    async def open_model(self, spec: str) -> None:
        """Load `spec` as the second model; say in one line what happened."""
        first = self.screen.controller.engine.model
        if first is not None and not first.abilities.scoring:
            self.screen.notify("Not opened: the loaded model's engine cannot score the text it reads, so there is "
                               "nothing to compare with.", severity="warning", timeout=8, markup=False)
            return
        self.screen.notify(f"Opening {spec} as the second model…", timeout=4, markup=False)
        why = await self.reader.open(spec)
        if why is not None:
            self.screen.notify(why, severity="warning", timeout=10, markup=False)
            return
        self.screen.notify(f"{self.reader.name} reads the chat beside the first model: "
                           "F3 shows where they disagree, e / E jump there.", timeout=8, markup=False)
        self.comparison = None
        self.chat_rested()

    async def close_model(self) -> None:
        """Close the second model (also at quit; nothing to do when none is open)."""
        if self._task is not None:
            self._task.cancel()
        if not self.open:
            return
        await self.reader.close()
        self.comparison, self.ratios, self._spans = None, {}, {}
        transcripts = self.screen.query(Transcript) if self.screen.is_mounted else []
        if transcripts:  # not at quit, when the screen's widgets are gone already
            transcripts[0].differences = frozenset()
            self._show()
            self.screen.second_changed()

    # --- reading the chat

    def chat_rested(self) -> None:
        """Compare again when the chat changed since the last comparison (never mid-reply)."""
        controller = self.screen.controller
        if not self.open or controller.busy or controller.loading or controller.engine.model is None:
            return
        if self.comparison is not None and self.comparison.revision == controller.conversation.revision:
            self._take(self.comparison)  # the same chat; its messages may show scored tokens by now
            return
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = asyncio.create_task(self._compare())
        self._show()

    async def _compare(self) -> None:
        controller = self.screen.controller
        try:
            comparison = await self.reader.compare(controller.engine, controller.model_folder, controller.conversation)
        except EngineError as exc:
            self.screen.notify(f"The second model could not read the chat: {str(exc).splitlines()[0]}",
                               severity="warning", timeout=8, markup=False)
            return
        finally:
            self._task = None
        self._take(comparison)

    def _take(self, comparison: Comparison) -> None:
        """Map each token on screen to its span (replies: their own tokens; other messages: the
        scored ones the transcript shows) and redraw."""
        self.comparison = comparison
        transcript = self.screen.query_one(Transcript)
        spans: dict[int, Span] = {}
        leads: set[int] = set()  # a jump lands on the first shown token of a span where the choices differ
        for node, compared in zip(comparison.nodes, comparison.compared):
            if node is None:
                continue
            shown = transcript.tokens_of(node)
            seen: set[int] = set()
            for index, span in sorted(compared.by_token.items(), key=lambda item: item[0]):
                if index >= len(shown):
                    continue
                spans[id(shown[index])] = span
                if span.tops_differ and id(span) not in seen:
                    leads.add(id(shown[index]))
                seen.add(id(span))
        self._spans = spans
        self.ratios = {key: abs(span.log_ratio) if not math.isnan(span.log_ratio) else math.inf
                       for key, span in spans.items()}
        transcript.differences = frozenset(leads)
        self._show()
        self.screen.second_changed()

    # --- showing

    def token_selected(self, node: Node | None, index: int | None) -> None:
        self._cursor = (node, index)
        self._show()

    def _show(self) -> None:
        line = self.screen.query_one(SecondLine)
        line.set_class(not self.open, "-hidden")
        if not self.open:
            return
        node, index = self._cursor
        span = None
        if node is not None and index is not None:
            shown = self.screen.query_one(Transcript).tokens_of(node)
            span = self._spans.get(id(shown[index])) if index < len(shown) else None
        perplexity = self.comparison.perplexity if self.comparison is not None else (None, None)
        line.update(describe(self.reader.name, perplexity, span, busy=self._task is not None))
