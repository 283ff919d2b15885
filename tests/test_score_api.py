"""#33: the scoring contract (`engine.core.api`: ScoreRequest, Scored, probes, perplexity, the
`Abilities.scoring`/`probes` flags) as the scripted double and the remote engine keep it."""

from __future__ import annotations

import math

import pytest

from engine.core.api import (
    Abilities,
    EngineError,
    Message,
    ProbeRequest,
    ScoreRequest,
    check_score_request,
    perplexity,
)
from engine.scripted import SCORED_PROB, ScriptedEngine, ScriptedToken

CHAT = (Message("system", "be nice"), Message("user", "the cat sat"))


def test_perplexity_is_exp_of_the_mean_negative_logprob() -> None:
    assert perplexity([]) is None
    assert perplexity([math.log(0.5)] * 3) == pytest.approx(2.0)
    assert perplexity([math.log(0.5), math.log(0.125)]) == pytest.approx(4.0)
    assert perplexity([-math.inf]) == math.inf


@pytest.mark.parametrize("request_, says", [
    (ScoreRequest(), "empty"),
    (ScoreRequest(text=""), "empty"),
    (ScoreRequest(CHAT, text="x"), "not both"),
    (ScoreRequest(CHAT, candidates=-1), "candidates"),
    (ScoreRequest(CHAT, candidates=10_000), "candidates"),
])
def test_bad_score_requests_are_one_line(request_: ScoreRequest, says: str) -> None:
    with pytest.raises(EngineError, match=says):
        check_score_request(request_)


async def test_the_scripted_engine_scores_every_word_it_reads() -> None:
    engine = ScriptedEngine(scored={"cat": ScriptedToken("cat", 0.1, (("dog", 0.5),))})
    await engine.load("demo")
    assert engine.model is not None and engine.model.abilities.scoring and engine.model.abilities.probes
    scored = await engine.score(ScoreRequest(CHAT, candidates=3))
    assert len(scored.tokens) == len(scored.ids) - 1
    assert [t.index for t in scored.tokens] == list(range(1, len(scored.ids)))
    cat = next(t for t in scored.tokens if t.text == "cat")
    assert cat.logprob == pytest.approx(math.log(0.1)) and cat.rank == 2 and cat.sampled_prob is None
    assert [c.text for c in cat.candidates] == ["dog", "cat"]
    user = scored.messages[1]
    assert [t.text for t in scored.tokens[user.start - 1:user.end - 1]] == ["the", "cat", "sat"]
    expected = math.exp(-(2 * math.log(SCORED_PROB) + math.log(0.1)) / 3)
    assert user.perplexity == pytest.approx(expected) and user.scored == 3
    probes = await engine.probe(ProbeRequest(ScoreRequest(CHAT), user.start + 1, ("cat", "cat sat")))
    assert probes[0].first_rank == 2 and probes[0].logprob == pytest.approx(math.log(0.1))
    assert probes[1].logprob == pytest.approx(math.log(0.1) + math.log(SCORED_PROB))


async def test_an_engine_that_cannot_score_says_why() -> None:
    engine = ScriptedEngine(scoring=False)
    info = await engine.load("demo")
    assert not info.abilities.scoring and not info.abilities.probes
    assert "cannot score" in info.abilities.reason("scoring")
    with pytest.raises(EngineError, match="cannot score"):
        await engine.score(ScoreRequest(CHAT))


def test_a_remote_server_declares_it_cannot_score() -> None:
    from engine.remote.capabilities import Capabilities
    from engine.remote.engine import _abilities

    abilities = _abilities(Capabilities("vLLM", ("m",), True, 20, 0, True), True)
    assert not abilities.scoring and not abilities.probes
    assert "remote server" in abilities.reason("scoring")
    assert Abilities().scoring and Abilities().probes


def test_message_spans_follow_ids_and_bytes_in_order() -> None:
    from engine.core.scorespans import message_spans

    smile = "😀".encode()
    pieces = [b"<s>", b"user:", smile[:2], smile[2:] + b" hi", b" hi", b"<e>", b"bot:", b"\xd7", b"r", b"<e>"]
    ids = list(range(len(pieces)))
    # a text that starts inside a split character, then a reply found by its exact ids, then one not shown
    spans = message_spans(["😀 hi hi", (7, 8), "missing"], ids, pieces)
    assert spans == [(2, 5), (7, 9), (9, 9)]
    assert message_spans(["  hi  "], ids, pieces) == [(3, 4)]  # a template that trims: found stripped
    assert message_spans([" hi", " hi"], ids, pieces) == [(3, 4), (4, 5)]  # in order, never twice
