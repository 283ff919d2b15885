"""The chat screen's stage view (#32.3): the candidates panel's mode that shows, for the token under
the cursor, each candidate's probability after every stage of the sampling chain.

A mixin so `ChatScreen` stays a router: it calls `stage_cursor` whenever the panel's token may
have changed. Nothing is computed while the view is off (the decode loop never pays for it);
while it is on, each token asks the engine once (`EngineAPI.stages`, recomputed there). An
answer is shown only if the engine's recomputed log probabilities equal the ones the turn
reported: otherwise the numbers would describe another computation (the conversation before the
reply was cut to fit the context, another model's ids), and the panel says that in one line.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from engine.core.api import EngineError, StageRequest, StageView, TokenEvent
from engine.core.chat.conversation import Node
from engine.core.settings import printable
from tui.app.stage_request import stage_request
from tui.app.widgets.candidates import CandidatesPanel

if TYPE_CHECKING:
    from tui.app.controller import ChatController

AGREE = 1e-3  # the largest difference in log p between the recomputed row and the turn's own


class StageActions:
    """Needs `controller`, `query_one`, `notify`, `run_worker` and `_panel_cursor` (the screen has them)."""

    controller: ChatController
    _stage_asked: StageRequest | None = None

    def action_toggle_stages(self) -> None:
        """The stage view on or off (the probabilities table comes back)."""
        panel = self.query_one(CandidatesPanel)  # type: ignore[attr-defined]
        model = self.controller.engine.model
        if not panel.stages and model is not None and not model.abilities.stage_view:
            self.notify(model.abilities.reason("stage_view") or "This engine has no stage view.",  # type: ignore[attr-defined]
                        severity="warning", markup=False)
            return
        panel.stages = not panel.stages
        if panel.has_class("-hidden"):
            self.notify("The candidates panel is hidden: F9 shows it.", severity="warning", timeout=4)  # type: ignore[attr-defined]
        self._stage_asked = None
        self.stage_cursor()

    def stage_cursor(self) -> None:
        """Ask for the stage view of the token the panel shows (nothing while the view is off)."""
        panel = self.query_one(CandidatesPanel)  # type: ignore[attr-defined]
        if not panel.stages:
            return
        located = self._stage_token()
        if located is None:
            panel.stage_view, panel.stage_note = None, "Select a token (←/→ in the transcript)."
            return
        node, index = located
        if not node.version.ids_fit(self.controller.model_folder):
            panel.stage_view, panel.stage_note = None, "This reply came from another model: no stage view."
            return
        request = stage_request(self.controller.history(upto=node), node.version, index)
        if isinstance(request, str):
            self._stage_asked = None
            panel.stage_view, panel.stage_note = None, request
            return
        if request == self._stage_asked:
            return
        self._stage_asked = request
        panel.stage_view, panel.stage_note, panel.stage_offset = None, "", 0
        token = (node.version.tokens or [])[index]
        self.run_worker(self._fetch_stages(request, token), group="stages", exclusive=True)  # type: ignore[attr-defined]

    async def _fetch_stages(self, request: StageRequest, token: TokenEvent) -> None:
        panel = self.query_one(CandidatesPanel)  # type: ignore[attr-defined]
        try:
            view = await self.controller.engine.stages(request)
        except EngineError as error:
            if request == self._stage_asked:
                panel.stage_note = printable(str(error))
            return
        if request != self._stage_asked:
            return
        worst = differs(view, token)
        if worst > AGREE:
            panel.stage_note = (f"The recomputed row differs from the turn's (log p off by {worst:.2g}): the "
                                "conversation before this reply is not the one it answered; no stage view.")
            return
        panel.stage_view = view

    def _stage_token(self) -> tuple[Node, int] | None:
        from tui.app.widgets.transcript import Transcript

        cursor = self.query_one(Transcript).cursor or self._panel_cursor()  # type: ignore[attr-defined]
        return None if cursor is None else (cursor[0], cursor[1])


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
