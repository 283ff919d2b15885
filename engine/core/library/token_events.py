"""A token blob read straight into `TokenEvent`s, each column checked at once.

Why: opening a 2,000-message chat from the library spent most of its time turning each blob into
token dicts and then reading every dict back through the file format's checked reader, one value
at a time (`engine.core.chat.fileformat`). The blob's columns are typed already (whole numbers and
floats, `engine.core.library.blobs`), so what is left to check is each column's range, which a
single pass over the column does. The rules are the file format's, exactly: a hand-edited row
is refused where a hand-edited file would be (tests/test_token_events.py compares the two).
"""

from __future__ import annotations

import math
from typing import Any

import json

from engine.core.api import Candidate, TokenEvent
from engine.core.chat.conversation import Conversation
from engine.core.chat.fileformat import MAX_COUNT, MAX_ID, SLACK, conversation_and_nodes
from engine.core.library.blobs import BlobError, _undeltas, decode_columns
from engine.core.library.documents import BLOB_KEY, tokens_elsewhere


def stored_conversation(text: object, blobs: list[bytes]) -> Conversation:
    """A stored chat (its document's JSON and its token blobs) as a checked `Conversation`;
    ValueError naming the first problem. The skeleton goes through the file format's reader with
    each blob's tokens left out, then every version's tokens are read from its blob."""
    try:
        skeleton = json.loads(text)  # type: ignore[arg-type]
    except (ValueError, TypeError, RecursionError) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None
    conversation, nodes = conversation_and_nodes(tokens_elsewhere(skeleton))
    if skeleton.get("format") != 2:
        return conversation  # format 1 (a row written by hand): no blobs to read
    for node, stored in zip(nodes, skeleton["nodes"]):
        for version, raw in zip(node.versions, stored["versions"]):
            if BLOB_KEY in raw:
                at = raw[BLOB_KEY]
                if type(at) is not int or not 0 <= at < len(blobs):
                    raise ValueError(f"a version names token data {at!r} that is not there")
                version.tokens = decode_token_events(blobs[at])
    return conversation


def decode_token_events(blob: bytes) -> list[TokenEvent]:
    """The blob's tokens; `BlobError` (one line) for a blob that is damaged or holds a value the
    file format would refuse."""
    header, c = decode_columns(blob)
    try:
        return _events(header, c)
    except (KeyError, TypeError, IndexError) as exc:
        raise BlobError(f"token data is damaged ({type(exc).__name__})") from None


def _events(header: dict[str, Any], c: dict[str, list[Any]]) -> list[TokenEvent]:
    n = header["n"]
    texts, pieces = header["text"], header["piece"]
    _require(isinstance(texts, list) and isinstance(pieces, list) and len(texts) == len(pieces) == n
             and all(type(t) is str for t in texts) and all(type(p) is str for p in pieces), "token texts")
    _counts(c["index"], "index")
    _counts([r for r in c["rank"] if r is not None], "rank")
    _ids(c["id"], "id")
    _ids(c["c_id"], "candidate id")
    logprobs, c_logprobs = _logprobs(c["logprob"], "logprob"), _logprobs(c["c_logprob"], "candidate logprob")
    _probabilities(c["sampled_prob"], "sampled_prob")
    _probabilities(c["c_sampled_prob"], "candidate sampled_prob")
    _require(all(e is None or (math.isfinite(e) and e >= -SLACK) for e in c["entropy"]), "entropy out of range")
    cand_texts = _candidate_texts(header, c)
    ncand, c_ids, c_probs = c["ncand"], c["c_id"], c["c_sampled_prob"]
    _require(all(k >= 0 for k in ncand) and sum(ncand) == len(c_ids), "candidate counts")
    index, ids, probs, ranks, entropies = c["index"], c["id"], c["sampled_prob"], c["rank"], c["entropy"]
    events, at = [], 0
    for i in range(n):
        end = at + ncand[i]
        candidates = tuple(map(Candidate, c_ids[at:end], cand_texts[at:end], c_logprobs[at:end], c_probs[at:end]))
        at = end
        events.append(TokenEvent(index[i], ids[i], texts[i], pieces[i], logprobs[i], probs[i], ranks[i],
                                 entropies[i], candidates))
    return events


def _require(ok: bool, what: str) -> None:
    if not ok:
        raise BlobError(f"token data is damaged ({what})")


def _counts(values: list[int], what: str) -> None:
    _require(all(0 <= v <= MAX_COUNT for v in values), f"{what} out of range")


def _ids(values: list[int], what: str) -> None:
    """Token ids; -1 is a token a remote server named by text only."""
    _require(all(0 <= v <= MAX_ID or v == -1 for v in values), f"{what} is not a token id")


def _logprobs(values: list[float | None], what: str) -> list[float]:
    """At most 0 (within `SLACK`), or -inf; a missing one (null) is -inf, as in a file."""
    out = [-math.inf if v is None else v for v in values]
    _require(all(v == -math.inf or (math.isfinite(v) and v <= SLACK) for v in out), f"{what} out of range")
    return out


def _probabilities(values: list[float | None], what: str) -> None:
    _require(all(v is None or -SLACK <= v <= 1.0 + SLACK for v in values), f"{what} out of range")


def _candidate_texts(header: dict[str, Any], c: dict[str, list[Any]]) -> list[str]:
    """Each candidate's text: stored per candidate, or through the id -> text table."""
    texts = header.get("c_text")
    if texts is None:
        table = header["table_text"]
        _require(isinstance(table, list) and all(type(t) is str for t in table), "candidate texts")
        by_id = dict(zip(_undeltas(c["table_id"]), table))
        texts = [by_id[i] for i in c["c_id"]]
    _require(isinstance(texts, list) and len(texts) == len(c["c_id"]) and all(type(t) is str for t in texts),
             "candidate texts")
    return texts
