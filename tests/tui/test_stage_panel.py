"""The stage view in the app (#32.3): `w` turns the candidates panel into the stage table of the
selected token (model, each stage, final; ✗ where a stage removed a candidate; the chosen one
followed through), asks the engine once per token and nothing while it is off, says why in one
line where it cannot be shown (a streaming reply, a hand-chosen branch token, a remote server,
a recomputed row that is not the turn's), and ←/→ page its columns."""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.core.api import Abilities, EngineError, StageRequest, StageView
from engine.scripted import ScriptedEngine, ScriptedToken
from tui.app.stage_request import stage_request
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.transcript import Transcript
from tui_helpers import SIZE, screen_text, send, start_reply, wait_until

LOW = ScriptedToken(" zebra", 0.02, ((" cat", 0.6), (" dog", 0.3)))
SCRIPT = [["A", LOW, " end"]]


async def _select(app: Any, pilot: Any, index: int) -> None:
    transcript = app.screen.query_one(Transcript)
    transcript.focus()
    await pilot.press("end")
    for _ in range(2 - index):
        await pilot.press("left")
    await pilot.pause()


async def test_w_shows_each_stage_for_the_selected_token(make_app: Any) -> None:
    engine = ScriptedEngine(SCRIPT)
    app = make_app(engine, config_text="[sampling]\ntemperature = 0.0\n")
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await _select(app, pilot, 1)
        assert engine.stage_requests == []  # nothing is asked while the view is off
        await pilot.press("w")
        panel = app.screen.query_one(CandidatesPanel)
        await wait_until(pilot, lambda: panel.stage_view is not None)
        text = screen_text(app)
        assert "stages" in text and "model" in text and "temp" in text and "final" in text
        assert "▶" in text and "✗" in text  # the chosen token, and a candidate greedy removed
        request = engine.stage_requests[-1]
        assert request.tokens[-1] == panel.token.id and not request.continue_last
        await pilot.press("left")  # the previous token: asked once more
        await wait_until(pilot, lambda: len(engine.stage_requests) == 2 and panel.stage_view is not None)
        await pilot.press("w")  # back to the probabilities
        await pilot.pause()
        assert "sampled" in screen_text(app) and not panel.stages


async def test_the_highlighted_candidate_s_line_names_the_stage(make_app: Any) -> None:
    app = make_app(ScriptedEngine(SCRIPT), config_text="[sampling]\ntemperature = 0.0\n")
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await _select(app, pilot, 1)
        await pilot.press("w")
        panel = app.screen.query_one(CandidatesPanel)
        await wait_until(pilot, lambda: panel.stage_view is not None)
        panel.focus()
        await pilot.press("down")
        await pilot.pause()
        assert "removed by temperature" in screen_text(app)


async def test_a_streaming_reply_waits_and_a_refusal_is_one_line(make_app: Any) -> None:
    engine = ScriptedEngine(SCRIPT)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        engine.hold_after = 2
        await start_reply(app, pilot)
        app.screen.query_one(Transcript).focus()
        await pilot.press("w")
        await wait_until(pilot, lambda: "computed once the reply" in screen_text(app))
        engine.release()
        panel = app.screen.query_one(CandidatesPanel)
        await wait_until(pilot, lambda: panel.stage_view is not None)

        async def refuse(request: StageRequest) -> StageView:
            raise EngineError("The replay does not match this reply.")
        engine.stages = refuse  # type: ignore[method-assign]
        await _select(app, pilot, 0)
        await wait_until(pilot, lambda: "The replay does not match" in screen_text(app))


async def test_a_row_that_is_not_the_turn_s_is_not_shown(make_app: Any) -> None:
    """The engine's recomputed log p must be the turn's: else the table would be another computation."""
    engine = ScriptedEngine(SCRIPT)
    real = engine.stages

    async def shifted(request: StageRequest) -> StageView:
        view = await real(request)
        return dataclasses.replace(view, logprobs=tuple(x - 0.5 for x in view.logprobs))
    engine.stages = shifted  # type: ignore[method-assign]
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await _select(app, pilot, 1)
        await pilot.press("w")
        await wait_until(pilot, lambda: "differs from the turn's" in screen_text(app))
        assert app.screen.query_one(CandidatesPanel).stage_view is None


async def test_an_engine_without_the_view_says_why_once(make_app: Any) -> None:
    engine = ScriptedEngine(SCRIPT)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        info = engine.model
        assert info is not None
        engine._model = dataclasses.replace(info, abilities=Abilities(
            stage_view=False, why=(("stage_view", "No whole logits row here."),)))
        app.screen.query_one(Transcript).focus()
        await pilot.press("w")
        await wait_until(pilot, lambda: any("No whole logits row here." == n.message for n in app._notifications))
        assert not app.screen.query_one(CandidatesPanel).stages


def test_a_branch_s_request_starts_where_its_turn_did() -> None:
    """Tokens before a branch point were not drawn by the branch's turn; after it, the request
    continues the partial reply and its changes count from there."""
    from engine.core.api import Candidate, Message, SamplingParams, TokenEvent
    from engine.core.chat.conversation import Version

    def tok(i: int) -> TokenEvent:
        return TokenEvent(i, 10 + i, f"t{i}", f"t{i}", -1.0, 0.5, 1, 1.0, (Candidate(10 + i, f"t{i}", -1.0, 0.5),))
    params = SamplingParams(seed=3)
    later = params.with_changes(temperature=0.2)
    version = Version(text="", tokens=[tok(i) for i in range(5)], params=params, finish_reason="stop",
                      branched_at=1, changes=[(3, later)])
    history = (Message("user", "hi"),)
    assert "chosen by hand" in str(stage_request(history, version, 1))
    assert "copied" in str(stage_request(history, version, 0))
    request = stage_request(history, version, 4)
    assert isinstance(request, StageRequest)
    assert request.continue_last and request.messages[-1].token_ids == (10, 11)
    assert request.tokens == (12, 13, 14) and request.changes == ((1, later),)
    assert "finished" in str(stage_request(history, dataclasses.replace(version, finish_reason=None), 4))
    previewed = dataclasses.replace(version, turn_start=4)  # tokens 2 and 3 came from a finished preview
    assert "preview" in str(stage_request(history, previewed, 3))
    request = stage_request(history, previewed, 4)
    assert isinstance(request, StageRequest) and request.messages[-1].token_ids == (10, 11, 12, 13)
    assert request.tokens == (14,) and request.changes == ((0, later),)
    assert "seed" in str(stage_request(history, dataclasses.replace(version, params=None), 4))


def _render(renderable: Any, width: int = 42) -> str:
    from rich.console import Console

    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_the_table_pages_its_stage_columns_and_scrolls_its_rows() -> None:
    """Eight stages do not fit the side panel's 42 cells: "model" stays, the rest page (‹ › say
    so); the rows follow the cursor in a short panel, and the line under names the stage."""
    from engine.core.api import Candidate, TokenEvent
    from tui.app.widgets.stage_table import stage_table

    names = ["model", "logit bias", "penalties", "top-k", "top-p", "min-p", "XTC", "temperature", "final"]
    ids = tuple(range(10))
    probs = tuple(0.1 for _ in ids)
    view = StageView(ids, tuple((n, probs) for n in names), ("",) * 9 + ("top-p",), 0, (-2.3,) * 10)
    token = TokenEvent(0, 0, "a", "a", -2.3, 0.1, 1, 1.0, tuple(Candidate(i, f"c{i}", -2.3, 0.1) for i in ids))
    first = _render(stage_table(view, token, 0, 42, 0, False, "", True))
    assert "model" in first and "bias" in first and "temp" not in first and "›" in first
    later = _render(stage_table(view, token, 0, 42, 4, False, "", True))
    assert "model" in later and "temp" in later and "final" in later and "bias" not in later and "‹" in later
    short = _render(stage_table(view, token, 9, 42, 0, False, "", True, height=6))
    assert "c9" in short and "c0" not in short and "removed by top-p" in short


async def test_right_and_left_page_the_stage_columns_in_the_panel(make_app: Any) -> None:
    engine = ScriptedEngine(SCRIPT)
    real = engine.stages
    names = ["model", "logit bias", "penalties", "top-k", "top-p", "min-p", "XTC", "temperature", "final"]

    async def many(request: StageRequest) -> StageView:
        view = await real(request)
        probs = view.stages[-1][1]
        return dataclasses.replace(view, stages=tuple((n, probs) for n in names))
    engine.stages = many  # type: ignore[method-assign]
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await _select(app, pilot, 1)
        await pilot.press("w")
        panel = app.screen.query_one(CandidatesPanel)
        await wait_until(pilot, lambda: panel.stage_view is not None)
        assert "bias" in screen_text(app) and "final" not in screen_text(app)
        panel.focus()
        await pilot.press("right", "right", "right", "right", "right", "right")
        await pilot.pause()
        assert panel.stage_offset == 4 and "final" in screen_text(app) and "bias" not in screen_text(app)
        await pilot.press("left")
        await pilot.pause()
        assert panel.stage_offset == 3


async def test_a_branch_s_own_tokens_are_asked_as_its_turn_drew_them(make_app: Any) -> None:
    """After choosing candidate 2 at token 1, the branch's turn drew from token 2 on: its stage
    view continues the partial reply there; token 1 itself was chosen by hand."""
    engine = ScriptedEngine([["A", LOW, " end", " more"]])
    app = make_app(engine, config_text="[preview]\nenabled = false\n")
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        transcript = app.screen.query_one(Transcript)
        transcript.focus()
        await pilot.press("home", "right")  # token 1, " zebra"
        await pilot.press("2")  # branch on its second candidate
        await wait_until(pilot, lambda: not app.controller.busy and
                         app.controller.conversation.path()[-1].version.branched_at == 1)
        version = app.controller.conversation.path()[-1].version
        assert version.turn_start == 2
        transcript.focus()
        await pilot.press("home", "right")
        await pilot.press("w")
        await wait_until(pilot, lambda: "chosen by hand" in screen_text(app))
        await pilot.press("right")
        panel = app.screen.query_one(CandidatesPanel)
        await wait_until(pilot, lambda: panel.stage_view is not None)
        request = engine.stage_requests[-1]
        assert request.continue_last and len(request.messages[-1].token_ids or ()) == 2 and len(request.tokens) == 1
