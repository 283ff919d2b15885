"""Exact history under the chat templates of real families, on both kinds of trained tokenizer.

The rule (engine/core/api.py): what the model saw when it wrote a reply is what it sees of that reply
later. Turn k's prompt starts with turn k-1's prompt and its reply's ids; then the template's own
text after the reply, the new message and the generation prompt, each text run tokenized as the
whole text would be. The oracles are hand-written texts (`template_fixtures.FAMILIES[...].seen`),
tokenized whole by the tokenizer itself; the engine runs check it over real turns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from engine_helpers import GREEDY, cold_greedy, reply, run
from mlx_lm.utils import load_tokenizer
from template_fixtures import FAMILIES, Kind, family_model
from test_engine_cache import assert_fed_exactly, fed, unfed  # noqa: F401 - `fed` is a fixture

from engine.core.api import Message, TurnFinished
from engine.local.client import Engine
from engine.local.prompt import render_prompt

KINDS: tuple[Kind, ...] = ("bpe", "metaspace")
SYSTEM, USER1, USER2 = "be kind", "hello the cat", "and then the dog"
THINKING = ("qwen3", "qwen3_no_thinking")


@pytest.fixture(scope="module")
def family_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("families")


def _cases(with_system: bool) -> list[Any]:
    return [pytest.param(kind, family, system, id=f"{kind}-{family}" + ("-system" if system else ""))
            for kind in KINDS for family, spec in FAMILIES.items()
            for system in ((None, SYSTEM) if with_system and spec.system else (None,))]


def _conversation(system: str | None, *rest: Message) -> list[Message]:
    return ([Message("system", system)] if system else []) + [Message("user", USER1), *rest]


def _reply_text(family: str) -> str:
    """A reply as the model might write it: a leading space, a thinking block for Qwen3."""
    return ("<think>\nhmm.\n</think>\n\n" if family == "qwen3" else "") + " Paris is big."


@pytest.mark.parametrize(("kind", "family", "system"), _cases(with_system=True))
def test_first_turn_is_the_tokenizers_own_template_ids(family_root: Path, kind: Kind, family: str,
                                                       system: str | None) -> None:
    tok = load_tokenizer(family_model(family_root, kind, family))
    messages = _conversation(system)
    expected = tok.apply_chat_template([{"role": m.role, "content": m.text} for m in messages], tokenize=True,
                                       add_generation_prompt=True)
    assert render_prompt(tok, messages, continue_last=False) == list(expected)


@pytest.mark.parametrize(("kind", "family", "system"), _cases(with_system=True))
def test_a_reply_is_seen_later_exactly_as_the_model_wrote_it(family_root: Path, kind: Kind, family: str,
                                                            system: str | None) -> None:
    """The second turn's ids are the whole oracle text tokenized at once, the reply's ids being
    the ones that whole tokenization gives it (so every text run is checked in place)."""
    tok = load_tokenizer(family_model(family_root, kind, family))
    written = _reply_text(family)
    seen = FAMILIES[family].seen(system, USER1, written, USER2)
    start = FAMILIES[family].seen(system, USER1, "\0", USER2).index("\0")
    encoding = tok._tokenizer(seen, add_special_tokens=False, return_offsets_mapping=True)
    whole, offsets = encoding["input_ids"], encoding["offset_mapping"]
    inside = [i for i, (a, _) in enumerate(offsets) if start <= a < start + len(written)]
    first, last = inside[0], inside[-1] + 1
    assert (offsets[first][0], offsets[last - 1][1]) == (start, start + len(written))  # a clean cut
    messages = _conversation(system, Message("assistant", written, tuple(whole[first:last])), Message("user", USER2))
    assert render_prompt(tok, messages[:-2], False) == whole[:first]  # the first turn: what the model saw
    assert render_prompt(tok, messages, False) == whole


async def _turn(engine: Engine, fed: list[int], conversation: list[Message], previous: TurnFinished | None = None,
                eos: int = -1, continue_last: bool = False) -> TurnFinished:
    """One turn that prefills only new ids; after `previous`, its prompt starts with that turn's
    prompt and reply (and the stop token `eos` right after them, where the model wrote it and
    the template has one there)."""
    _, finished = await run(engine, conversation, continue_last=continue_last)
    assert_fed_exactly(fed, finished)
    if previous is not None:
        seen = previous.prompt_ids + previous.token_ids
        assert finished.prompt_ids[: len(seen)] == seen
        stop = int(previous.finish_reason == "stop" and not unfed(previous)
                   and finished.prompt_ids[len(seen) : len(seen) + 1] == (eos,))
        assert finished.reused_tokens == len(seen) - unfed(previous) + stop
    return finished


@pytest.mark.parametrize(("kind", "family", "system"), _cases(with_system=False) + [
    pytest.param("metaspace", "mistral", SYSTEM, id="metaspace-mistral-system")])
async def test_three_turns_a_regenerate_and_a_branch_prefill_only_new_ids(
    family_root: Path, engine: Engine, fed: list[int], kind: Kind, family: str, system: str | None,
) -> None:
    path = family_model(family_root, kind, family)
    await engine.load(str(path))
    eos = load_tokenizer(path).eos_token_id
    conversation = _conversation(system)
    previous = None
    for turn in range(3):
        previous = await _turn(engine, fed, conversation, previous, eos)
        if turn < 2:
            conversation += [reply(previous), Message("user", f"the big {turn} bird")]
    assert list(previous.token_ids) == cold_greedy(path, previous.prompt_ids, GREEDY.max_tokens)
    again = await _turn(engine, fed, conversation)
    assert (again.reused_tokens, again.prefilled_tokens) == (previous.prompt_tokens - 1, 1)
    assert again.token_ids == previous.token_ids
    i = min(3, len(again.token_ids) - 1)
    events, _ = await run(engine, conversation)  # once more, for the candidates at position i
    fed.clear()
    alternative = events[i].candidates[1].id
    branch = Message("assistant", "", again.token_ids[:i] + (alternative,))
    branched = await _turn(engine, fed, [*conversation, branch], continue_last=True)
    assert (branched.reused_tokens, branched.prefilled_tokens) == (again.prompt_tokens + i, 1)
    assert list(branched.token_ids[i + 1 :]) == cold_greedy(path, branched.prompt_ids, GREEDY.max_tokens)


def _stopping_on(path: Path, folder: Path, stop_id: int) -> Path:
    """A copy of a family model that also stops on `stop_id`, which the template renders as its
    end-of-turn marker (the tokenizer's eos token), as a real model's own stop token is."""
    import json
    import shutil

    shutil.copytree(path, folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config["eos_token_id"] = [config["eos_token_id"], stop_id]
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    settings["eos_token"] = load_tokenizer(path).convert_ids_to_tokens(stop_id)
    (folder / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
    return folder


@pytest.mark.parametrize("kind", KINDS)
async def test_a_stop_token_the_model_wrote_stays_right_after_its_reply(
    family_root: Path, tmp_path: Path, engine: Engine, fed: list[int], kind: Kind
) -> None:
    """Llama-2 renders ``' ' + eos`` after a reply; the model wrote its stop token right after its
    last token, so that is where the next prompt has it, and the cache keeps it."""
    path = family_model(family_root, kind, "llama2")
    await engine.load(str(path))
    _, probe = await run(engine, _conversation(None))
    stop = probe.token_ids[2]  # the model's third token: now its stop token
    await engine.load(str(_stopping_on(path, tmp_path / "stopping", stop)))
    fed.clear()
    first = await _turn(engine, fed, _conversation(None))
    assert first.finish_reason == "stop" and 1 <= first.generated_tokens <= 2
    second = await _turn(engine, fed, _conversation(None, reply(first), Message("user", USER2)), first, stop)
    assert second.prompt_ids[len(first.prompt_ids) + first.generated_tokens] == stop
    assert second.reused_tokens == first.prompt_tokens + first.generated_tokens + 1  # the stop token too


@pytest.mark.parametrize("opening", ["assistant", "system"])
def test_a_chat_opening_with_a_reply_renders_as_the_template_says(family_root: Path, opening: str) -> None:
    """A greeting before any user message had no generation prompt before it: the template's own
    rendering of the whole chat is used (the reply's ids spliced where its text stands)."""
    tok = load_tokenizer(family_model(family_root, "bpe", "chatml"))
    greeting = tuple(tok.encode(" Hello, how are you?", add_special_tokens=False))
    messages = [Message("system", SYSTEM)] if opening == "system" else []
    messages += [Message("assistant", " Hello, how are you?", greeting), Message("user", USER1)]
    expected = tok.apply_chat_template([{"role": m.role, "content": m.text} for m in messages], tokenize=True,
                                       add_generation_prompt=True)
    assert render_prompt(tok, messages, continue_last=False) == list(expected)
