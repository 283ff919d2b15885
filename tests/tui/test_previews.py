"""What-if previews in the app (scripted engine): asked once the cursor rests, shown under the
candidates, cached, dropped when the chat changes, and a branch that starts from a finished one."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from tui_helpers import SIZE, screen_text, send, wait_idle, wait_until

from engine.core.api import EngineError, PreviewEvent, PreviewRequest
from engine.scripted import ScriptedEngine
from tui.app.widgets.previews import PreviewsPanel

FAST = "[preview]\ndelay_ms = 30\n"


def panel(app: Any) -> PreviewsPanel:
    return app.screen.query_one(PreviewsPanel)


def all_done(app: Any) -> bool:
    rows = panel(app).rows
    return bool(rows) and all(done for _, _, done in rows)


async def test_previews_show_under_the_candidates_and_come_from_the_cache(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine, config_text=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape", "right", "home")  # token 0: "Hello"; candidates Hello, Hi, Hey, Greetings
        await wait_until(pilot, lambda: all_done(app))
        asked = engine.preview_requests[-1]
        tokens = app.controller.conversation.path()[-1].version.tokens
        assert asked.candidates == tuple(c.id for c in tokens[0].candidates[:3])
        assert asked.messages[-1].token_ids == ()
        assert [row[0] for row in panel(app).rows] == ["Hello", "Hi", "Hey"]
        assert "Hi → ! I am a" in screen_text(app)
        asked_before = len(engine.preview_requests)
        await pilot.press("right")
        await wait_until(pilot, lambda: len(engine.preview_requests) == asked_before + 1 and all_done(app))
        await pilot.press("left")  # back: instant, from the cache
        await pilot.pause()
        assert all_done(app) and len(engine.preview_requests) == asked_before + 1


async def test_a_cursor_that_keeps_moving_asks_nothing_until_it_rests(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine, config_text="[preview]\ndelay_ms = 400\n")
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape", "right", "home", "right", "right", "right")
        await wait_until(pilot, lambda: all_done(app))
        [asked] = engine.preview_requests
        assert len(asked.messages[-1].token_ids or ()) == 3  # only the token the cursor rested on


async def test_choosing_a_previewed_candidate_continues_from_its_preview(make_app: Any) -> None:
    """At temperature 0 a preview is exactly what the branch draws: the branch starts with it,
    and every one of its tokens keeps its statistics (before #30.2: "candidates are off", rank
    and entropy "—" for the first 12)."""
    engine = ScriptedEngine()
    app = make_app(engine, config_text=FAST + "[sampling]\ntemperature = 0.0\n")
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape", "right", "home")
        await wait_until(pilot, lambda: all_done(app))
        node = app.controller.conversation.path()[-1]
        hi = node.version.tokens[0].candidates[1]
        previewed = app.screen.previews.complete(app.screen.preview_actions.shown, hi.id)
        await pilot.press("2")  # branch on "Hi"
        await wait_idle(app, pilot)
        sent = engine.requests[-1].messages[-1].token_ids
        assert sent == (hi.id, *(t.id for t in previewed.tokens))  # the preview's 12 ids are not asked again
        assert node.version.reply_text().startswith("Hi! I am a scripted model.")
        assert not panel(app).rows and not app.screen.previews.rows(engine.preview_requests[0])[0].done  # dropped
        tokens = node.version.tokens
        assert all(t.candidates and t.rank is not None and t.entropy is not None for t in tokens)
        assert [t.index for t in tokens] == list(range(len(tokens)))


async def test_at_a_sampling_temperature_a_branch_draws_its_own_tokens(make_app: Any) -> None:
    """Before (#30.2): at T=0.70 the branch took the greedy preview's 12 tokens (no statistics),
    and choosing the same candidate twice started both branches alike."""
    engine = ScriptedEngine()
    app = make_app(engine, config_text=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        assert app.controller.params.temperature > 0
        await pilot.press("escape", "right", "home")
        await wait_until(pilot, lambda: all_done(app))
        node = app.controller.conversation.path()[-1]
        hi = node.version.tokens[0].candidates[1]
        await pilot.press("2")
        await wait_idle(app, pilot)
        assert engine.requests[-1].messages[-1].token_ids == (hi.id,)  # only the chosen candidate
        assert all(t.candidates and t.rank is not None for t in node.version.tokens)


class _NoPreviews(ScriptedEngine):
    def preview(self, request: PreviewRequest) -> AsyncGenerator[PreviewEvent, None]:
        async def refuse() -> AsyncGenerator[PreviewEvent, None]:
            raise EngineError("Previews are not available on a remote server (--server): they need the local engine.")
            yield  # pragma: no cover
        return refuse()


async def test_an_engine_without_previews_says_so_once(make_app: Any) -> None:
    app = make_app(_NoPreviews(), config_text=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape", "right", "home")
        await wait_until(pilot, lambda: bool(app.screen.previews.problem))
        await pilot.press("right", "right")
        await pilot.pause(0.3)
        assert [row[1] for row in panel(app).rows] == [
            "no preview: Previews are not available on a remote server (--server): they need the local engine."]
        notes = [n for n in app._notifications if n.title == "No preview"]
        assert len(notes) == 1 and "remote server" in notes[0].message


class _NoRoomOnce(ScriptedEngine):
    """Refuses its first preview as a full context does, then previews as usual."""

    refused = False

    def preview(self, request: PreviewRequest) -> AsyncGenerator[PreviewEvent, None]:
        if self.refused:
            return super().preview(request)
        self.refused = True
        self.preview_requests.append(request)

        async def refuse() -> AsyncGenerator[PreviewEvent, None]:
            raise EngineError("The reply already fills the context: there is no room to preview.")
            yield  # pragma: no cover
        return refuse()


async def test_one_refused_preview_leaves_the_others_on(make_app: Any) -> None:
    """Before: one refusal ("no room to preview") turned previews off for the rest of the session."""
    engine = _NoRoomOnce()
    app = make_app(engine, config_text=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape", "home")  # one action: only the first token is asked
        await wait_until(pilot, lambda: engine.refused and bool(panel(app).rows))
        assert "no room to preview" in panel(app).rows[0][1]
        await pilot.press("right")
        await wait_until(pilot, lambda: all_done(app) and len(panel(app).rows) == 3)
        assert len(engine.preview_requests) == 2
        await pilot.press("left")  # the refused token is not asked again
        await pilot.pause(0.3)
        assert len(engine.preview_requests) == 2 and "no room" in panel(app).rows[0][1]


async def test_the_palette_turns_previews_off_and_on(make_app: Any) -> None:
    from tui_helpers import palette_run

    engine = ScriptedEngine()
    app = make_app(engine, config_text=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await palette_run(pilot, "Previews on/off")
        await pilot.press("escape", "right", "home")
        await pilot.pause(0.3)
        assert not engine.preview_requests and not panel(app).rows
        await palette_run(pilot, "Previews on/off")
        app.screen.query_one("Transcript").focus()
        await pilot.press("right")
        await wait_until(pilot, lambda: all_done(app))
        assert engine.preview_requests


async def test_preview_text_is_shown_as_data(make_app: Any) -> None:
    """Model text in a preview (markup-like, a terminal escape, a line break) is shown, never obeyed."""
    from engine.scripted import ScriptedToken

    script = [["A", ScriptedToken(" B", 0.5, (("[b]C", 0.3),)), "\x1b[2J", "\n", "[red]z"]]
    app = make_app(ScriptedEngine(script), config_text=FAST)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape", "right", "home", "right")
        await wait_until(pilot, lambda: all_done(app))
        text = screen_text(app)
        assert "[b]C → ␛[2J↵[red]z" in text


async def test_new_parameters_ask_the_previews_again(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine, config_text=FAST + 'sampling = "current"\n')
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape", "right", "home")
        await wait_until(pilot, lambda: all_done(app))
        before = engine.preview_requests[-1]
        app.screen.param_actions.set_params(app.controller.params.with_changes(temperature=1.3))
        await wait_until(pilot, lambda: engine.preview_requests[-1] is not before and all_done(app))
        again = engine.preview_requests[-1]
        assert again.params.temperature == 1.3 and before.params.temperature != 1.3
        assert again.messages == before.messages
