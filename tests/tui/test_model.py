"""The Textual-free data model: the conversation tree, serialisation and parameter arithmetic."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine.core.api import PARAM_LIMITS, Candidate, ParamError, SamplingParams, TokenEvent
from engine.core.chat.conversation import Conversation, Node, TurnStats, Version
from engine.core.param_steps import PANEL_PARAMS, format_param, parse_param, step_param
from engine.core.chat.fileformat import conversation_from_dict, conversation_to_dict
from engine.core.chat.store import load_conversation, save_conversation


def _token(i: int, text: str, p: float = 0.5) -> TokenEvent:
    cands = (Candidate(10 + i, text, math.log(p), 0.6), Candidate(99, " alt", math.log(0.2), 0.0))
    return TokenEvent(i, 10 + i, text, text, math.log(p), 0.6, 1, 1.2, cands)


def _sample() -> Conversation:
    conv = Conversation("be kind")
    conv.append(Node("user", [Version("hi")]))
    reply = Version(tokens=[_token(0, "Hel"), _token(1, "lo")], params=SamplingParams(seed=3),
                    finish_reason="stop", text="Hello",
                    stats=TurnStats(5, 0, 5, 2, 0.01, 100.0, 50.0, 7, 512))
    assistant = conv.append(Node("assistant", [reply]))
    assistant.add_version(Version(tokens=[_token(0, "Hel"), _token(1, "p")], branched_at=1, finish_reason="stop"))
    conv.append(Node("user", [Version("and then?")]))
    return conv


def test_path_follows_active_versions() -> None:
    conv = _sample()
    path = conv.path()
    assert [n.role for n in path] == ["user", "assistant", "user"]
    assistant = path[1]
    assert assistant.flip(-1) and assistant.active == 0
    assert [n.role for n in conv.path()] == ["user", "assistant"]  # branch 1 has no follow-up yet
    assert not assistant.flip(-1)
    assert assistant.flip(1) and len(conv.path()) == 3


def test_messages_for_the_engine() -> None:
    conv = _sample()
    messages = conv.messages()
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2].token_ids == (10, 11) and messages[2].text == "Help"
    upto = conv.messages(upto=conv.path()[1])
    assert [m.role for m in upto] == ["system", "user"]


def test_reply_ids_go_to_the_model_that_made_them_only() -> None:
    conv = _sample()
    reply = conv.path()[1].version
    reply.model = "/models/a"
    assert conv.messages(model="/models/a")[2].token_ids == (10, 11)
    other = conv.messages(model="/models/b")[2]
    assert other.token_ids is None and other.text == "Help"  # as text: the engine tokenizes it
    reply.model = None  # made in this session, for whatever model is loaded
    assert conv.messages(model="/models/b")[2].token_ids == (10, 11)


def test_files_without_model_tags_never_splice_ids() -> None:
    data = conversation_to_dict(_sample())
    data["nodes"][1]["versions"][1].pop("model")  # a file from before the tags
    reply = conversation_from_dict(data).path()[1].version
    assert reply.model == "" and not reply.ids_fit(None) and not reply.ids_fit("/models/a")
    assert conversation_from_dict(data).messages(model="/models/a")[2].token_ids is None


def test_round_trip_through_dict_and_json(tmp_path: Path) -> None:
    conv = _sample()
    data = conversation_to_dict(conv)
    json.dumps(data)  # plain JSON types only
    again = conversation_from_dict(json.loads(json.dumps(data)))
    assert conversation_to_dict(again) == data
    assert again.path()[1].versions[0].tokens == conv.path()[1].versions[0].tokens
    assert again.path()[1].versions[0].params == SamplingParams(seed=3)
    assert again.path()[1].active == 1
    save_conversation(conv, tmp_path / "c.json")
    assert conversation_to_dict(load_conversation(tmp_path / "c.json")) == data
    assert len(list(again.iter_nodes())) == 3
    conv.path()[1].version.model = "/models/a"
    assert conversation_from_dict(json.loads(json.dumps(conversation_to_dict(conv)))).path()[1].version.model == "/models/a"


def test_streaming_text_is_joined_tokens() -> None:
    version = Version(tokens=[_token(0, "a"), _token(1, "b")])
    assert version.reply_text() == "ab"
    version.finish_reason, version.text = "stop", "ab!"
    assert version.reply_text() == "ab!"


@pytest.mark.parametrize("name", [name for name, _ in PANEL_PARAMS])
def test_step_param_moves_and_clamps(name: str) -> None:
    params = SamplingParams(top_p=0.9)
    up = step_param(params, name, 1)
    assert getattr(up, name) != getattr(params, name)
    assert step_param(up, name, -1) == params
    low, high, _ = PARAM_LIMITS[name]
    far = params
    for _ in range(500):
        far = step_param(far, name, -1)
    value = getattr(far, name)
    assert value is None if name == "seed" else low <= value <= high


def test_parse_param_refuses_bad_values() -> None:
    params = SamplingParams()
    assert parse_param(params, "temperature", " 1.5 ").temperature == 1.5
    assert parse_param(params, "top_k", "40").top_k == 40
    assert parse_param(params, "seed", "random").seed is None
    with pytest.raises(ParamError, match="between"):
        parse_param(params, "top_p", "1.5")
    with pytest.raises(ParamError, match="whole number"):
        parse_param(params, "top_k", "4.5")
    with pytest.raises(ParamError, match="must be a number"):
        parse_param(params, "temperature", "hot")


def test_format_param() -> None:
    params = SamplingParams()
    assert format_param(params, "top_k") == "0 (off)"
    assert format_param(params, "seed") == "random"
    assert format_param(params, "temperature") == "0.70"


async def test_screenshot_helper_writes_an_svg(tmp_path: Path) -> None:
    from engine.scripted import ScriptedEngine
    from tui.app.screenshot import take

    out = await take(tmp_path / "shot.svg", ScriptedEngine(), "Say hello")
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<svg") and "scripted" in text
