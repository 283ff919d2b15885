"""A second model reads the chat beside the first (#33, item 5): both score the visible path, the
messages are aligned by characters, and opening one is refused in one line when it cannot be."""

from __future__ import annotations

import math
from pathlib import Path

from engine.core.api import GenerateRequest, Message, SamplingParams, ScoreRequest
from engine.core.chat.conversation import Conversation, Node, Version
from engine.local.client import Engine
from engine.scripted import ScriptedEngine
from engine_helpers import turn
from tui.app.second_reader import SecondReader


async def _chat_from(first: Engine) -> Conversation:
    """A user message and the first model's own reply (its exact tokens)."""
    tokens, done = await turn(first, GenerateRequest((Message("user", "Tell me a story"),),
                                                      SamplingParams(max_tokens=8, seed=3, candidates=5)))
    chat = Conversation("")
    chat.append(Node("user", [Version("Tell me a story")]))
    chat.append(Node("assistant", [Version(done.text, list(tokens), SamplingParams(max_tokens=8, seed=3),
                                           done.finish_reason, model=first.model.path)]))
    return chat


async def test_two_real_models_compare_every_token_of_the_chat(chatml_model: Path, llama3_model: Path) -> None:
    first = Engine()
    reader = SecondReader(Engine)
    try:
        await first.load(str(chatml_model))
        assert await reader.open(str(llama3_model)) is None
        chat = await _chat_from(first)
        comparison = await reader.compare(first, first.model.path, chat)
        user, reply = chat.path()
        reply_tokens = reply.version.tokens
        spans = comparison.of(reply).spans
        assert {i for s in spans for i in s.a} == set(range(len(reply_tokens)))  # every token of the reply
        assert all(s.exact for s in spans)  # one tokenizer: one token each side
        own = sum(t.logprob for t in reply_tokens)  # the reply's raw logprobs as it was written
        assert math.isclose(math.fsum(s.a_logprob for s in spans), own, rel_tol=1e-4, abs_tol=1e-4)
        alone = await reader.engine.score(ScoreRequest(chat.messages(model=reader.info.path), continue_last=True))
        reply_score = alone.messages[1]
        b_alone = [alone.tokens[p - 1].logprob for p in range(reply_score.start, reply_score.end)]
        assert math.isclose(math.fsum(s.b_logprob for s in spans), math.fsum(b_alone), rel_tol=1e-4, abs_tol=1e-4)
        assert comparison.at(reply, 0) is spans[0] and comparison.of(user).spans
        assert comparison.perplexity[1] is not None and math.isclose(comparison.perplexity[1], alone.perplexity)
    finally:
        await reader.close()
        await first.close()


async def test_opening_is_refused_in_one_line_when_it_cannot_be(tmp_path: Path) -> None:
    reader = SecondReader(ScriptedEngine, available=lambda: 10 << 20)
    assert "server" in (await reader.open("http://localhost:8080") or "")
    weights = tmp_path / "big.gguf"
    with weights.open("wb") as out:
        out.truncate(64 << 20)  # 64 MiB of weights with 10 MiB free
    refused = await reader.open(str(weights))
    assert refused is not None and refused.startswith("Not opened: it needs about") and "\n" not in refused
    assert reader.engine is None
    failing = SecondReader(lambda: ScriptedEngine(load_error="no such model: nope"))
    assert await failing.open("nope") == "Not opened: no such model: nope" and failing.engine is None
