"""Reading a stored chat's tokens straight from their blobs (`engine.core.library.token_events`)
gives exactly what the file format's checked reader gives for the same tokens, and refuses
exactly the values it refuses."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from engine.core.chat.fileformat import _Reader, _token, conversation_from_dict
from engine.core.library import Library, LibraryError
from engine.core.library.blobs import BlobError, decode_tokens, encode_tokens
from engine.core.library.token_events import decode_token_events


def _tokens(rng: random.Random, n: int, same_texts: bool = True) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        cands = [{"id": rng.randrange(50), "text": "", "logprob": -rng.random() * 5,
                  "sampled_prob": rng.choice([None, rng.random()])} for _ in range(rng.randrange(0, 6))]
        for c in cands:
            c["text"] = f"t{c['id']}" if same_texts else f"t{rng.random()}"
        out.append({"index": i, "id": rng.randrange(50), "text": f"w{i}", "piece": f"p{i}",
                    "logprob": rng.choice([-rng.random(), None, -math.inf]), "sampled_prob": rng.choice([None, 0.5]),
                    "rank": rng.choice([None, 1, 7]), "entropy": rng.choice([None, 1.25]), "candidates": cands})
    return out


def _checked(blob: bytes) -> object:
    try:
        return [_token(_Reader(d, "t")) for d in decode_tokens(blob)]
    except ValueError:
        return "refused"


def _fast(blob: bytes) -> object:
    try:
        return decode_token_events(blob)
    except BlobError:
        return "refused"


@pytest.mark.parametrize("same_texts", [True, False])
def test_random_tokens_read_the_same_both_ways(same_texts: bool) -> None:
    rng = random.Random(7)
    for _ in range(20):
        blob = encode_tokens(_tokens(rng, rng.randrange(0, 30), same_texts))
        assert _fast(blob) == _checked(blob) != "refused"


BAD = [("logprob", 3.0), ("logprob", math.nan), ("logprob", math.inf), ("sampled_prob", 1.5),
       ("sampled_prob", -0.2), ("sampled_prob", math.nan), ("entropy", -1.0), ("entropy", math.inf),
       ("id", -2), ("id", 2**31), ("rank", -1), ("index", -5), ("logprob", 0.0005), ("sampled_prob", 1.0005)]


@pytest.mark.parametrize(("field", "value"), BAD, ids=[f"{f}={v}" for f, v in BAD])
def test_a_value_the_file_format_refuses_is_refused_and_one_it_takes_is_taken(field: str, value: object) -> None:
    tokens = _tokens(random.Random(1), 3)
    tokens[1][field] = value
    blob = encode_tokens(tokens)
    assert _fast(blob) == _checked(blob)
    cand = _tokens(random.Random(2), 2)
    cand[0]["candidates"] = [{"id": 3, "text": "x", "logprob": -1.0, "sampled_prob": 0.1}]
    if field in ("logprob", "sampled_prob", "id"):
        cand[0]["candidates"][0][field] = value
        blob = encode_tokens(cand)
        assert _fast(blob) == _checked(blob)


def test_a_stored_chat_opens_as_the_document_reads(tmp_path: Path) -> None:
    from tui.bench.library_section import chat_document

    library = Library(tmp_path / "l.sqlite3")
    library.save(chat_document(random.Random(3), 20, 4), model_spec="m")
    chat_id = library.entries("", 1)[0].id
    entry, opened = library.load_conversation(chat_id)
    read = conversation_from_dict(library.load(chat_id).document)
    shape = [[(n.role, v.text, v.tokens, v.params, v.finish_reason) for v in n.versions] for n in read.iter_nodes()]
    assert [[(n.role, v.text, v.tokens, v.params, v.finish_reason) for v in n.versions]
            for n in opened.iter_nodes()] == shape
    assert entry.id == chat_id and len(opened.path()) == 40


def test_a_damaged_blob_is_one_line_naming_the_chat(tmp_path: Path) -> None:
    from tui.bench.library_section import chat_document

    library = Library(tmp_path / "l.sqlite3")
    library.save(chat_document(random.Random(3), 2, 4), model_spec="m")
    chat_id = library.entries("", 1)[0].id
    bad = encode_tokens([{**_tokens(random.Random(1), 1)[0], "logprob": 7.0}])
    with library._conn:
        library._conn.execute("UPDATE token_blobs SET data = ? WHERE conversation_id = ?", (bad, chat_id))
    with pytest.raises(LibraryError, match=f"chat {chat_id} .* is damaged") as caught:
        library.load_conversation(chat_id)
    assert "\n" not in str(caught.value)
