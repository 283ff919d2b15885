"""#33.1-3/6 in the app (scripted engine): the text the model reads is scored, so the token
cursor, the candidates panel and the heatmap work inside the user's own message; a probe at the
cursor; perplexity per message and per chat; an engine that cannot score says why once and the
probe is hidden."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tui_helpers import SIZE, screen_text, send, wait_until

from engine.scripted import NO_SCORING, SCORED_PROB, ScriptedEngine, ScriptedToken
from tui.app.screens.dialogs import ValueDialog
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.message_views import AssistantView
from tui.app.widgets.status_bar import StatusBar
from tui.app.widgets.transcript import Transcript
from tui.app.widgets.user_view import UserView

CAT = {"cat": ScriptedToken("cat", 0.1, (("dog", 0.5),))}


def user_view(app: Any) -> UserView:
    return app.screen.query(UserView).last()


def scored(app: Any) -> bool:
    return bool(app.screen.query(UserView)) and bool(user_view(app).tokens)


async def drawn_chunk(app: Any, pilot: Any) -> Any:
    """The user's tokens as drawn: scored, mounted and laid out (scores arrive before the view
    redraws, and a click on a chunk not laid out yet lands nowhere)."""
    await wait_until(pilot, lambda: scored(app))
    await wait_until(pilot, lambda: (c := user_view(app)._chunk) is not None and c.region.width > 0)
    await pilot.pause()
    return user_view(app)._chunk


def panel_text(app: Any) -> str:
    rendered = app.screen.query_one(CandidatesPanel).render().renderables
    return "\n".join(str(part) for part in rendered[:2])  # the numbers, and the probe's row when there is one


async def select_cat(app: Any, pilot: Any) -> None:
    """Send "the cat sat", wait for its scores, put the cursor on "cat"."""
    await send(app, pilot, "the cat sat")
    await wait_until(pilot, lambda: scored(app))
    await pilot.press("escape", "up", "up", "right")  # the reply, then the message above it: "the", then "cat"
    user = app.controller.conversation.path()[-2]
    await wait_until(pilot, lambda: app.screen.query_one(Transcript).cursor == (user, 1))


async def test_the_users_own_tokens_show_what_the_model_would_have_said(make_app: Any) -> None:
    app = make_app(ScriptedEngine(scored=CAT))
    async with app.run_test(size=SIZE) as pilot:
        await select_cat(app, pilot)
        view = user_view(app)
        assert [t.text for t in view.tokens] == ["the", " cat", " sat"]  # the user's text, spaces and all
        assert "the cat sat" in screen_text(app)
        summary = panel_text(app)
        assert "cat" in summary and "p raw  10.0%" in summary and "rank 2" in summary
        table = app.screen.query_one(CandidatesPanel)._table(view.tokens[1]).plain
        assert "dog" in table  # the model would have said "dog" here
        assert view.has_class("-inspect")


async def test_the_heatmap_colours_the_users_text(make_app: Any) -> None:
    app = make_app(ScriptedEngine(scored={"cat": ScriptedToken("cat", 0.05)}))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "the cat sat")
        await drawn_chunk(app, pilot)
        await pilot.press("escape", "f3")
        chunk = user_view(app)._chunk
        await wait_until(pilot, lambda: chunk is not None and chunk.heat is not None)
        styles = {span.style.bgcolor or span.style.color for span in chunk.render().spans}
        assert len(styles) >= 2  # "cat" (5%) is not coloured as "the" (25%)


async def test_a_click_on_a_users_token_selects_it(make_app: Any) -> None:
    app = make_app(ScriptedEngine(scored=CAT))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "the cat sat")
        chunk = await drawn_chunk(app, pilot)
        await pilot.click(chunk, offset=(5, 0))
        user = app.controller.conversation.path()[-2]
        await wait_until(pilot, lambda: app.screen.query_one(Transcript).cursor == (user, 1))


async def test_perplexity_per_message_and_per_chat(make_app: Any) -> None:
    app = make_app(ScriptedEngine(scored=CAT))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "the cat sat")
        await wait_until(pilot, lambda: scored(app))
        expected = math.exp(-(2 * math.log(SCORED_PROB) + math.log(0.1)) / 3)
        header = str(user_view(app).query_one("#header").render())
        assert header == f"you · ppl {expected:.3g}"
        reply = app.screen.query(AssistantView).last()
        await wait_until(pilot, lambda: "ppl " in str(reply.query_one("#header").render()))
        chat = app.screen.query_one(StatusBar).perplexity
        assert chat is not None and f"chat ppl {chat:.3g}" in screen_text(app)


async def test_a_probe_gives_a_phrases_probability_and_first_rank(make_app: Any) -> None:
    engine = ScriptedEngine(scored=CAT)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await select_cat(app, pilot)
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, ValueDialog))
        await pilot.press(*"cat sat", "enter")
        await wait_until(pilot, lambda: "probe" in panel_text(app))
        p = 0.1 * SCORED_PROB
        assert f"probe 'cat sat' {p * 100:.1f}% · rank 2" in panel_text(app)
        assert any(n.message == f"'cat sat': p {p * 100:.1f}% (2 tokens), first token rank 2" for n in app._notifications)
        asked = engine.probe_requests[-1]
        user_span = engine.score_requests[-1]
        assert asked.context == user_span and asked.phrases == ("cat sat",)
        await pilot.press("right")  # another token: the probe line was for "cat"
        await wait_until(pilot, lambda: "probe" not in panel_text(app))


async def test_a_digit_on_the_users_text_says_it_is_not_a_reply(make_app: Any) -> None:
    app = make_app(ScriptedEngine(scored=CAT))
    async with app.run_test(size=SIZE) as pilot:
        await select_cat(app, pilot)
        before = len(app.controller.conversation.path()[-1].versions)
        await pilot.press("1")
        await wait_until(pilot, lambda: any("text the model reads" in n.message for n in app._notifications))
        assert len(app.controller.conversation.path()[-1].versions) == before


async def test_an_engine_that_cannot_score_says_why_once_and_hides_the_probe(make_app: Any) -> None:
    engine = ScriptedEngine(scoring=False)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "the cat sat")
        await send(app, pilot, "more")
        said = [n for n in app._notifications if NO_SCORING in n.message]
        assert len(said) == 1 and "no probes, no perplexity" in said[0].message
        assert not engine.score_requests and not user_view(app).tokens
        await pilot.press("escape", "left")
        await pilot.press("question_mark")
        await pilot.pause()
        assert not isinstance(app.screen, ValueDialog)
        transcript = app.screen.query_one(Transcript)
        assert "token.probe" not in {b.binding.id for b in app.screen.active_bindings.values()} or \
            not transcript.check_action("screen.probe_phrase", ())
        assert "ppl" not in screen_text(app)
        from tui.app.commands import LogitscopeCommands

        labels = [label for label, _call, _help in LogitscopeCommands(app.screen)._commands()]
        assert "Set fork margin…" in labels and not any(label.startswith("Probe") for label in labels)


async def test_on_the_real_engine_the_users_text_is_scored_once_the_reply_ends(chatml_model: Any, tmp_path: Any) -> None:
    """A chat ending with a reply is read as that reply continued: before, the real engine
    refused it ("already ends with a reply") and the question stayed plain text."""
    from engine.core.settings.config import load_config
    from engine.local.client import Engine
    from tui.app.application import LogitscopeApp
    from tui_helpers import wait_idle

    engine = Engine()
    app = LogitscopeApp(engine, load_config(tmp_path / "config.toml"), model=str(chatml_model),
                        config_dir=tmp_path / "cfg", save_dir=tmp_path / "state")
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot, timeout=60)
        app.chat_screen.param_actions.set_params(app.controller.params.with_changes(max_tokens=6, temperature=0.0))
        await send(app, pilot, "hello there")
        await wait_until(pilot, lambda: scored(app), timeout=60)
        view = user_view(app)
        assert "".join(t.text for t in view.tokens) == "hello there"
        assert all(t.candidates and t.rank is not None and t.sampled_prob is None for t in view.tokens)
        assert str(view.query_one("#header").render()).startswith("you · ppl ")
        # A probe of the user's own words in their own place is those tokens: the position is right
        # (the tiny random model's replies are stray bytes, which no typed phrase spells).
        user = app.controller.conversation.path()[-2]
        result = await app.chat_screen.scope.scores.probe(user, 0, "hello there")
        assert result.ids == tuple(t.id for t in view.tokens)
        assert result.logprobs == pytest.approx([t.logprob for t in view.tokens], abs=1e-4)


async def test_scoring_switched_off_from_the_palette_or_the_config(make_app: Any) -> None:
    from tui_helpers import palette_run

    engine = ScriptedEngine(scored=CAT)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "the cat sat")
        await wait_until(pilot, lambda: scored(app))
        await palette_run(pilot, "Score the chat on/off")
        await wait_until(pilot, lambda: not user_view(app).tokens)
        assert "ppl" not in screen_text(app)
        asked = len(engine.score_requests)
        await send(app, pilot, "more")
        await pilot.pause(0.5)
        assert len(engine.score_requests) == asked
    engine = ScriptedEngine(scored=CAT)
    app = make_app(engine, config_text="[ui]\nscore_chat = false\n")
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "the cat sat")
        await pilot.pause(0.5)
        assert not engine.score_requests and not user_view(app).tokens


async def test_n_stops_in_the_users_text_and_f_only_in_replies(make_app: Any) -> None:
    """n / N walk every token shown, the user's own too ("cat" at 10% is unlikely); f / F stay
    in the replies, where a fork is a way the reply could have gone ("cat", its top two 15% and
    10%, is a fork by margin, yet f passes it)."""
    app = make_app(ScriptedEngine(scored={"cat": ScriptedToken("cat", 0.1, (("dog", 0.15),))}),
                   config_text="[ui]\nlow_prob_threshold = 0.2\nfork_margin = 0.1\n")
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "the cat sat")
        await wait_until(pilot, lambda: scored(app))
        user, reply = app.controller.conversation.path()[-2:]
        transcript = app.screen.query_one(Transcript)
        await pilot.press("escape", "n")  # from the chat's first token
        await wait_until(pilot, lambda: transcript.cursor == (user, 1))
        await pilot.press("f")  # "cat" is a fork by margin (15% / 10%), but f looks in replies only
        await wait_until(pilot, lambda: transcript.cursor is not None and transcript.cursor[0] is reply)


async def test_y_copies_a_token_of_the_users_text(make_app: Any) -> None:
    """Before: y on a token of the user's scored text said "Select a token first"."""
    app = make_app(ScriptedEngine(scored=CAT))
    async with app.run_test(size=SIZE) as pilot:
        await select_cat(app, pilot)
        await pilot.press("y")
        await wait_until(pilot, lambda: app.clipboard == " cat")
        await pilot.press("Y")
        await wait_until(pilot, lambda: app.clipboard == "the cat sat")


async def test_a_chat_too_long_to_score_is_said_once_not_at_each_turn(make_app: Any) -> None:
    """The engine refuses each score with the chat's growing length: one toast, not one a turn."""
    from engine.core.api import ContextLimitError, ScoreRequest

    engine = ScriptedEngine()

    async def too_long(request: ScoreRequest) -> Any:
        raise ContextLimitError(f"The text is {40 + len(request.messages)} tokens but the context limit is 40.")

    engine.score = too_long  # type: ignore[method-assign]
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "one")
        await wait_until(pilot, lambda: any("Not scored" in n.message for n in app._notifications))
        await send(app, pilot, "two")
        await pilot.pause(0.5)
        said = [n.message for n in app._notifications if "Not scored" in n.message]
        assert said == ["Not scored: The text is 42 tokens but the context limit is 40."]


async def test_the_system_prompt_is_scored_too(make_app: Any) -> None:
    app = make_app(ScriptedEngine(scored=CAT))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("f2")
        await wait_until(pilot, lambda: app.screen is not app.chat_screen)
        await pilot.press(*"a cat", "ctrl+s")
        system = lambda: next((v for v in app.screen.query(UserView) if v.node.role == "system"), None)  # noqa: E731
        await wait_until(pilot, lambda: system() is not None and bool(system().tokens))
        view = system()
        assert [t.text for t in view.tokens] == ["a", " cat"]
        assert str(view.query_one("#header").render()).startswith("system · ppl ")
        await pilot.press("escape", "up", "up", "up")  # the reply, the question, the system prompt
        await wait_until(pilot, lambda: app.screen.query_one(Transcript).cursor == (view.node, 0))


async def test_a_score_running_at_quit_is_cancelled(make_app: Any) -> None:
    """Before: the score's task outlived the screen, awaiting an engine about to be closed."""
    import asyncio

    from engine.core.api import ScoreRequest

    engine = ScriptedEngine()
    started = asyncio.Event()

    async def never_ends(request: ScoreRequest) -> Any:
        started.set()
        await asyncio.Event().wait()

    engine.score = never_ends  # type: ignore[method-assign]
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await wait_until(pilot, started.is_set)
        task = app.chat_screen.scope.scores._task
        await pilot.press("ctrl+q")
        await pilot.pause()
    await asyncio.sleep(0)
    assert task is not None and task.cancelled()


async def test_another_model_that_cannot_score_takes_the_old_scores_away(make_app: Any) -> None:
    """Before: the first model's tokens and perplexities stayed on screen under a model that
    cannot score (nothing was asked, so nothing replaced them)."""
    engine = ScriptedEngine(scored=CAT)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "the cat sat")
        await wait_until(pilot, lambda: scored(app))
        engine.scoring = False
        await app.controller.load("other")
        await wait_until(pilot, lambda: not user_view(app).tokens)
        await wait_until(pilot, lambda: "ppl" not in screen_text(app))
        assert app.screen.query_one(StatusBar).perplexity is None


async def test_a_score_in_flight_stops_before_the_next_turn_asks_the_engine(make_app: Any) -> None:
    """Before: it was cancelled only once the turn had started (GenerationStarted), so the turn's
    first request queued behind the score's current chunk on the engine thread."""
    import asyncio

    from engine.core.api import ScoreRequest

    engine = ScriptedEngine()
    started = asyncio.Event()

    async def never_ends(request: ScoreRequest) -> Any:
        started.set()
        await asyncio.Event().wait()

    engine.score = never_ends  # type: ignore[method-assign]
    seen: list[bool] = []
    generate = engine.generate

    def watching(request: Any) -> Any:
        task = app.chat_screen.scope.scores._task
        seen.append(task is None or task.done() or task.cancelling() > 0)
        return generate(request)

    engine.generate = watching  # type: ignore[method-assign]
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await wait_until(pilot, started.is_set)
        await send(app, pilot, "again")
        assert seen == [True, True]


async def test_a_turn_keeps_its_prompts_statistics_only_while_the_chat_is_scored(make_app: Any) -> None:
    """While scoring is on, each turn asks its prefill to keep every prompt row's statistics
    (GenerateRequest.score_candidates): the score after it reads only the reply again."""
    from tui_helpers import palette_run

    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "one")
        assert engine.requests[-1].score_candidates == app.chat_screen.scope.scores.candidates == 10
        await palette_run(pilot, "Score the chat on/off")
        await send(app, pilot, "two")
        assert engine.requests[-1].score_candidates is None
    engine = ScriptedEngine(scoring=False)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "one")
        assert engine.requests[-1].score_candidates is None
