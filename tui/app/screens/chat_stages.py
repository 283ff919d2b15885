"""The chat screen's stage view (#32.3): the candidates panel's mode that shows, for the token under
the cursor, each candidate's probability after every stage of the sampling chain.

A helper the chat screen owns (`ChatScreen.stage_actions`), typed by what it needs (`StageHost`):
the screen calls `cursor` whenever the panel's token may have changed. Nothing is computed while the view is off (the decode loop never pays for it);
while it is on, each token asks the engine once (`EngineAPI.stages`, recomputed there). An
answer is shown only if the engine's recomputed log probabilities equal the ones the turn
reported: otherwise the numbers would describe another computation (the conversation before the
reply was cut to fit the context, another model's ids), and the panel says that in one line.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

from engine.core.api import EngineError, StageRequest, StageView, TokenEvent
from engine.core.settings import printable
from tui.app.stage_request import stage_request
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.screens.host import ScreenHost

if TYPE_CHECKING:
    from tui.app.controller import ChatController
    from tui.app.screens.chat_previews import PreviewActions


AGREE = 1e-3  # the largest difference in log p between the recomputed row and the turn's own


class StageHost(ScreenHost, Protocol):
    """What the stage view needs of the chat screen."""

    controller: ChatController
    preview_actions: PreviewActions  # `panel_cursor`: the token under the cursor, else the panel's


class StageActions:
    """The chat screen's stage view (see the module docstring)."""

    def __init__(self, screen: StageHost) -> None:
        self.screen = screen
        self.asked: StageRequest | None = None  # the request last sent (its answer is awaited or shown)

    def toggle(self) -> None:
        """The stage view on or off (the probabilities table comes back)."""
        panel = self.screen.query_one(CandidatesPanel)
        model = self.screen.controller.engine.model
        if not panel.stages and model is not None and not model.abilities.stage_view:
            self.screen.notify(model.abilities.reason("stage_view") or "This engine has no stage view.",
                               severity="warning", markup=False)
            return
        panel.stages = not panel.stages
        if panel.has_class("-hidden"):
            self.screen.notify("The candidates panel is hidden: F9 shows it.", severity="warning", timeout=4)
        self.asked = None
        self.cursor()

    def cursor(self) -> None:
        """Ask for the stage view of the token the panel shows (nothing while the view is off)."""
        panel = self.screen.query_one(CandidatesPanel)
        if not panel.stages:
            return
        located = self.screen.preview_actions.panel_cursor()
        controller = self.screen.controller
        if located is None:
            panel.stage_view, panel.stage_note = None, "Select a token (←/→ in the transcript)."
            return
        node, index = located
        if not node.version.ids_fit(controller.model_folder):
            panel.stage_view, panel.stage_note = None, "This reply came from another model: no stage view."
            return
        request = stage_request(controller.history(upto=node), node.version, index)
        if isinstance(request, str):
            self.asked = None
            panel.stage_view, panel.stage_note = None, request
            return
        if request == self.asked:
            return
        self.asked = request
        panel.stage_view, panel.stage_note, panel.stage_offset = None, "", 0
        token = (node.version.tokens or [])[index]
        self.screen.run_worker(self._fetch(request, token), group="stages", exclusive=True)

    async def _fetch(self, request: StageRequest, token: TokenEvent) -> None:
        panel = self.screen.query_one(CandidatesPanel)
        try:
            view = await self.screen.controller.engine.stages(request)
        except EngineError as error:
            if request == self.asked:
                panel.stage_note = printable(str(error))
            return
        if request != self.asked:
            return
        worst = differs(view, token)
        if worst > AGREE:
            panel.stage_note = (f"The recomputed row differs from the turn's (log p off by {worst:.2g}): the "
                                "conversation before this reply is not the one it answered; no stage view.")
            return
        panel.stage_view = view


def differs(view: StageView, token: TokenEvent) -> float:
    """The largest |recomputed - stored| log p over the candidates both list (inf where one of
    them is -inf and the other is not)."""
    stored = {c.id: c.logprob for c in token.candidates}
    stored.setdefault(token.id, token.logprob)
    worst = 0.0
    for cid, recomputed in zip(view.candidates, view.logprobs):
        if cid in stored and not (recomputed == stored[cid] == -math.inf):
            worst = max(worst, abs(recomputed - stored[cid]))
    return worst
