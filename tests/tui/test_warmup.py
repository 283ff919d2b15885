"""The app asks the engine to cache the conversation whenever what the next reply builds on
changes without a turn (resumed, another branch shown, a new system prompt, a model loaded), so
the next reply starts from a cached history; and never while a reply streams."""

from __future__ import annotations

from typing import Any

from engine.core.api import Message
from engine.scripted import ScriptedEngine
from tui_helpers import SIZE, chat_and_quit, palette_run, send, wait_idle, wait_until


def _roles(messages: tuple[Message, ...]) -> list[str]:
    return [m.role for m in messages]


def _chats(engine: ScriptedEngine) -> list[tuple[Message, ...]]:
    """The conversations warmed (an empty chat is warmed too while the chat is scored: below)."""
    return [messages for messages in engine.prepared if messages]


async def test_a_resumed_conversation_is_warmed_and_its_next_turn_reuses_it(make_app: Any) -> None:
    await chat_and_quit(make_app)
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        assert _chats(engine) == []  # a new chat without a system prompt: nothing to cache
        await palette_run(pilot, "Resume last")
        await wait_until(pilot, lambda: len(_chats(engine)) == 1)
        warmed = _chats(engine)[-1]
        assert _roles(warmed) == ["user", "assistant"] and warmed[1].token_ids  # the exact ids
        await send(app, pilot, "and then?")
        assert engine.requests[-1].messages[:2] == warmed
        stats = app.controller.conversation.path()[-1].version.stats
        assert stats is not None and stats.prompt_tokens - stats.reused_tokens <= 4  # only the new message


async def test_showing_another_branch_warms_it(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("ctrl+r")  # a second version of the reply
        await wait_idle(app, pilot)
        node = app.controller.conversation.path()[-1]
        first, second = node.versions
        before = len(engine.prepared)
        await pilot.press("escape", "right", "left_square_bracket")
        await pilot.pause()
        assert node.version is first and len(engine.prepared) == before + 1
        assert engine.prepared[-1][-1].token_ids == first.token_ids
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert engine.prepared[-1][-1].token_ids == second.token_ids


async def test_a_new_system_prompt_is_warmed_and_again_after_a_model_switch(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("f2")
        await pilot.pause()
        app.screen.query_one("#text").text = "Be brief."  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert engine.prepared[-1] == (Message("system", "Be brief."),)
        models: list[str | None] = []  # the model loaded at each request to warm
        real_prepare = engine.prepare

        def prepare(messages: Any, draft: str = "", thinking: Any = None, score_candidates: Any = None) -> Any:
            models.append(engine.model.path if engine.model is not None else None)
            return real_prepare(messages, draft, thinking, score_candidates)

        engine.prepare = prepare  # type: ignore[method-assign]
        app.switch_model("other")  # the conversation (here its system prompt) stays, for the new model
        await wait_until(pilot, lambda: "/scripted/other" in models)
        assert engine.prepared[-1] == (Message("system", "Be brief."),)


async def test_nothing_is_warmed_while_a_reply_streams(make_app: Any) -> None:
    engine = ScriptedEngine(token_delay=0.05)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        app.screen.query_one("ChatInput").focus()
        await pilot.press(*"hi", "enter")
        await wait_until(pilot, lambda: app.controller.busy)
        before = list(engine.prepared)
        app.controller.prepare()  # the reply will leave the cache at the conversation anyway
        assert engine.prepared == before
        await wait_idle(app, pilot)


async def test_a_pause_in_typing_reads_the_draft_ahead(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        app.screen.query_one("ChatInput").focus()
        await pilot.press(*"the cat sat on")
        await wait_until(pilot, lambda: engine.drafts[-1:] == ["the cat sat on"])
        assert len(engine.drafts) < len("the cat sat on") // 2  # once per pause, not once per key
        assert _roles(engine.prepared[-1]) == ["user", "assistant"]  # the conversation it continues
        # the chat is scored: the warm-up keeps the rows' statistics the turn will ask for (a plain
        # one was read again by the scoring turn: the first message after a load reused nothing)
        assert app.controller.score_candidates is not None
        assert engine.prepare_scores[-1] == app.controller.score_candidates
        await pilot.press(*" the mat", "enter")
        await wait_idle(app, pilot)
        assert engine.requests[-1].messages[-1].text == "the cat sat on the mat"
        stats = app.controller.conversation.path()[-1].version.stats
        assert stats is not None and stats.prompt_tokens - stats.reused_tokens == 3  # "on the mat"


async def test_a_finished_reply_is_followed_by_a_warm_up_of_what_every_follow_up_shares(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await wait_until(pilot, lambda: _chats(engine) != [])
        reply = app.controller.conversation.path()[-1].version
        assert _chats(engine) == [(Message("user", "hi"), Message("assistant", reply.reply_text(), reply.token_ids))]


async def test_a_scored_chat_warms_what_the_load_cached_again_with_its_statistics(make_app: Any) -> None:
    """The load's warm-up (what every first prompt starts with: a system prompt) keeps no rows'
    statistics, and the first turn of a scored chat read it all again (SmolLM2 in tmux: reused 0
    of 47 when the message was sent at once). Once the chat is scored, the empty chat is warmed
    with the turn's candidates; the context shown stays the chat's (nothing measured for it)."""
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await wait_until(pilot, lambda: () in engine.prepared)
        candidates = app.controller.score_candidates
        assert candidates is not None
        assert engine.prepare_scores[engine.prepared.index(())] == candidates
        assert app.screen.query_one("StatusBar").context_used is None
