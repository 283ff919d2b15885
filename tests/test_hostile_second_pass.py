"""Hostile inputs, second pass (issue #29, items 1-11): each case fails on the code before its fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from engine_helpers import run

from engine.core.api import EngineError, Message, PreviewRequest, SamplingParams
from engine.local.client import Engine


# --- 1. every id that reaches a forward pass is checked at the door -------------------------------

def _with_token_past_the_table(source: Path, folder: Path) -> tuple[Path, int]:
    """A copy of `source` whose tokenizer gains a special token one past the embedding's last row
    and whose chat template writes it into every prompt: the model's own files make the bad id."""
    from transformers import AutoTokenizer

    shutil.copytree(source, folder)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|extra|>"]})
    extra = tokenizer.convert_tokens_to_ids("<|extra|>")
    tokenizer.chat_template = "<|extra|>" + tokenizer.chat_template
    tokenizer.save_pretrained(str(folder))
    return folder, extra


async def test_template_token_past_the_embedding_is_refused_at_the_door(
        chatml_model: Path, tmp_path: Path, engine: Engine) -> None:
    folder, extra = _with_token_past_the_table(chatml_model, tmp_path / "extra")
    info = await engine.load(str(folder))
    assert extra == info.vocab_size  # one past the last row
    door = f"token id {extra}.*vocabulary of {info.vocab_size}"
    with pytest.raises(EngineError, match=door):  # a turn
        await run(engine, [Message("user", "hello")])
    with pytest.raises(EngineError, match=door):  # a branch (a continued reply)
        await run(engine, [Message("user", "hello"), Message("assistant", "x", (5, 6))], continue_last=True)
    request = PreviewRequest((Message("user", "hello"), Message("assistant", "x", (5, 6))), (7, 8), 3,
                             SamplingParams(temperature=0.0))
    with pytest.raises(EngineError, match=door):  # a preview
        async for _ in engine.preview(request):
            pass
    assert await engine.prepare([Message("user", "hello"), Message("assistant", "x", (5, 6))]) == 0  # a warm-up


# --- 3. imported chats are range-checked; every JSON written is strict ----------------------------

def _chat_with(token: dict[str, object]) -> dict[str, object]:
    """A format-2 chat whose reply's one token is `token` (fields merged over a sane one)."""
    sane = {"index": 0, "id": 5, "text": "a", "piece": "a", "logprob": -0.5, "sampled_prob": 0.6, "rank": 1,
            "entropy": 1.2, "candidates": [{"id": 5, "text": "a", "logprob": -0.5, "sampled_prob": 0.6}]}
    reply = {"text": "a", "tokens": [{**sane, **token}], "finish_reason": "stop", "model": "m"}
    return {"format": 2, "nodes": [{"parent": None, "role": "user", "versions": [{"text": "hi"}]},
                                   {"parent": [0, 0], "role": "assistant", "versions": [reply]}]}


@pytest.mark.parametrize("bad", [
    {"logprob": 1000.0}, {"logprob": 10**400}, {"logprob": float("nan")}, {"logprob": float("inf")},
    {"sampled_prob": 7.0}, {"sampled_prob": -1.0}, {"entropy": -5.0}, {"entropy": float("inf")},
    {"index": 10**400}, {"index": -1}, {"rank": 10**30},
    {"candidates": [{"id": 5, "text": "a", "logprob": 3.0, "sampled_prob": 0.5}]},
])
def test_imported_numbers_out_of_range_are_refused_in_one_line(bad: dict[str, object]) -> None:
    from engine.core.chat.fileformat import conversation_from_dict

    with pytest.raises(ValueError, match=r"^file\.nodes\[1\]\.versions\[0\]\.tokens\[0\]\.\S+: .*(out of range|finite)"):
        conversation_from_dict(_chat_with(bad))


def test_an_impossible_token_round_trips_through_strict_json() -> None:
    import json

    from engine.core.chat.export import conversation_json
    from engine.core.chat.fileformat import conversation_from_dict, conversation_to_dict

    chat = conversation_from_dict(_chat_with({"candidates": [
        {"id": 5, "text": "a", "logprob": -0.5, "sampled_prob": 0.6},
        {"id": 6, "text": "b", "logprob": float("-inf"), "sampled_prob": 0.0}]}))
    text = conversation_json("t", "m", chat)

    def refuse(word: str) -> None:
        raise AssertionError(f"not strict JSON: {word}")

    data = json.loads(text, parse_constant=refuse)  # NaN / Infinity / -Infinity refused
    back = conversation_from_dict(data)
    assert back.path()[1].version.tokens[0].candidates[1].logprob == float("-inf")
    assert conversation_to_dict(back) == conversation_to_dict(chat)


def test_saved_files_and_the_library_write_strict_json(tmp_path: Path) -> None:
    import json

    from engine.core.chat.fileformat import conversation_from_dict
    from engine.core.chat.store import save_conversation
    from engine.core import strictjson

    chat = conversation_from_dict(_chat_with({"candidates": [
        {"id": 6, "text": "b", "logprob": float("-inf"), "sampled_prob": 0.0}]}))
    save_conversation(chat, tmp_path / "c.json")
    json.loads((tmp_path / "c.json").read_text(), parse_constant=lambda w: pytest.fail(w))
    from engine.core.chat.fileformat import conversation_to_dict
    from engine.core.library import Library

    library = Library(tmp_path / "lib.sqlite3")
    document = conversation_to_dict(chat)
    document["system_prompt"] = "s"
    document["nodes"][1]["versions"][0]["stats"] = {name: float("inf") for name in (
        "prompt_tokens", "reused_tokens", "prefilled_tokens", "generated_tokens", "ttft_s", "prefill_tps",
        "decode_tps", "context_used", "context_limit")}
    chat_id = library.save(document)
    (raw,) = library._conn.execute("SELECT document FROM conversations WHERE id = ?", (chat_id,)).fetchone()
    json.loads(raw, parse_constant=lambda w: pytest.fail(w))
    library.close()
    assert strictjson.dumps({"a": [1.0, float("nan"), {"b": (float("inf"),)}]}) == '{"a": [1.0, null, {"b": [null]}]}'


# --- 5. the library validates the documents it reads --------------------------------------------

WRONG_SHAPES = ['{"format": 2, "nodes": 5}', '[]', '7', 'null',
                '{"format": 2, "nodes": [{"parent": null, "role": "user", "versions": "x"}]}',
                '{"format": 2, "nodes": [{"parent": null, "role": "user", "versions": [{"text": 3}]}]}',
                '{"format": 2, "nodes": [7]}', '{"format": 2, "nodes": [{"versions": [{"__blob__": "x"}]}]}']


@pytest.mark.parametrize("doc", WRONG_SHAPES, ids=range(len(WRONG_SHAPES)))
def test_a_stored_document_of_the_wrong_shape_is_one_line(doc: str, capsys: pytest.CaptureFixture[str]) -> None:
    from engine.core.library import Library
    from engine.scripted import ScriptedEngine
    from tui.headless import main
    from tui.main import main as logitscope

    assert main(["run", "--no-config", "--model", "m", "--prompt", "hi", "--save"], engine_factory=ScriptedEngine) == 0
    library = Library()
    [entry] = library.entries()
    with library._write("test") as conn:
        conn.execute("UPDATE conversations SET document = ? WHERE id = ?", (doc, entry.id))
    library.close()
    capsys.readouterr()
    for argv in (["export", entry.id, "--format", "json"], ["export", entry.id],
                 ["run", "--no-config", "--model", "m", "--prompt", "more", "--continue", entry.id]):
        code = main(argv, engine_factory=ScriptedEngine) if argv[0] == "run" else logitscope(argv)
        err = capsys.readouterr().err
        assert code in (1, 2) and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
        assert err.startswith(f"logitscope: chat {entry.id}") and "is damaged" in err, err


# --- 11. a template that fails is named as the model's chat template -----------------------------

async def test_a_failing_chat_template_is_named(chatml_model: Path, tmp_path: Path, engine: Engine) -> None:
    from transformers import AutoTokenizer

    folder = tmp_path / "raising"
    shutil.copytree(chatml_model, folder)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    tokenizer.chat_template = "{% if messages | length > 1 %}{{ raise_exception('roles must alternate') }}{% endif %}" \
        + tokenizer.chat_template
    tokenizer.save_pretrained(str(folder))
    await engine.load(str(folder))
    _, first = await run(engine, [Message("user", "hello")])  # one message renders
    with pytest.raises(EngineError, match=r"^The model's chat template failed: roles must alternate$"):
        await run(engine, [Message("user", "hello"), Message("assistant", "x", first.token_ids),
                           Message("user", "again")])
    with pytest.raises(EngineError, match=r"^The model's chat template failed: roles must alternate$"):
        await engine.count_tokens([Message("user", "a"), Message("user", "b")])
