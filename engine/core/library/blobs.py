"""A reply's tokens (format 2's token dicts) as one compact binary blob, and back, exactly.

JSON spends ~60 bytes on each candidate's name and digits; a 2,000-token reply with 10 candidates
per token was ~1.5 MB. Here each field is a typed column (`array`), stored as float32 / int32
when every value survives that (what MLX computes is float32 already) and as float64 / int64
otherwise, so the round trip is exact either way. A candidate's text is not stored when its id
always names the same text in the blob (the usual case), only the id -> text table once. Optional
numbers (a remote server cannot tell some) keep a presence mask. The whole is zlib-compressed.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from array import array
from collections.abc import Iterable
from typing import Any

from engine.core import strictjson

MAGIC = b"LSTK1"
_INT32 = (-(2**31), 2**31 - 1)


class BlobError(ValueError):
    """A blob that is not one of ours (a damaged database row); the message is one line."""


def encode_tokens(tokens: list[dict[str, Any]]) -> bytes:
    """Pack token dicts (keys as `fileformat.token_to_dict` writes them) into one blob."""
    cands = [c for t in tokens for c in t["candidates"]]
    columns: dict[str, array] = {}
    masks: dict[str, bytes] = {}
    _ints(columns, "index", [t["index"] for t in tokens])
    _ints(columns, "id", [t["id"] for t in tokens])
    _ints(columns, "ncand", [len(t["candidates"]) for t in tokens])
    _floats(columns, masks, "logprob", [t["logprob"] for t in tokens])
    _floats(columns, masks, "sampled_prob", [t["sampled_prob"] for t in tokens])
    _floats(columns, masks, "entropy", [t["entropy"] for t in tokens])
    _optional_ints(columns, masks, "rank", [t["rank"] for t in tokens])
    _ints(columns, "c_id", [c["id"] for c in cands])
    _floats(columns, masks, "c_logprob", [c["logprob"] for c in cands])
    _floats(columns, masks, "c_sampled_prob", [c["sampled_prob"] for c in cands])
    table = _text_table(cands)
    header: dict[str, Any] = {"n": len(tokens), "text": [t["text"] for t in tokens],
                              "piece": [t["piece"] for t in tokens]}
    if table is None:
        header["c_text"] = [c["text"] for c in cands]
    else:
        header["table_text"] = list(table.values())
        _ints(columns, "table_id", _deltas(list(table)))
    header["columns"] = {name: col.typecode for name, col in columns.items()}
    header["masks"] = sorted(masks)
    body = b"".join(col.tobytes() for col in columns.values()) + b"".join(masks[k] for k in sorted(masks))
    head = strictjson.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return MAGIC + zlib.compress(struct.pack("<I", len(head)) + head + body, 6)


def decode_tokens(blob: bytes) -> list[dict[str, Any]]:
    """The inverse of `encode_tokens`; `BlobError` for anything that is not such a blob."""
    header, columns = decode_columns(blob)
    try:
        return _zip_tokens(header, columns)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise BlobError(f"token data is damaged ({type(exc).__name__})") from None


def decode_columns(blob: bytes) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The blob's header and its columns as lists (None where a mask says absent), unchecked
    beyond their lengths; `BlobError` for anything that is not such a blob."""
    if not isinstance(blob, (bytes, bytearray, memoryview)) or bytes(blob[:5]) != MAGIC:
        raise BlobError("token data is not a logitscope token blob")
    try:
        raw = zlib.decompress(bytes(blob[5:]))
        (size,) = struct.unpack_from("<I", raw)
        header = json.loads(raw[4:4 + size].decode("utf-8"))
        return header, _columns(header, memoryview(raw)[4 + size:])
    except (zlib.error, struct.error, ValueError, KeyError, TypeError, IndexError) as exc:
        raise BlobError(f"token data is damaged ({type(exc).__name__})") from None


def _columns(header: dict[str, Any], body: memoryview) -> dict[str, list[Any]]:
    """Read the columns back in the order `encode_tokens` wrote them."""
    n = header["n"]
    ncand_total = 0
    columns: dict[str, list[Any]] = {}
    offset = 0
    for name, code in header["columns"].items():
        count = ncand_total if name.startswith("c_") else len(header["table_text"]) if name == "table_id" else n
        col = array(code)
        end = offset + count * col.itemsize
        col.frombytes(body[offset:end])
        offset = end
        columns[name] = col.tolist()
        if name == "ncand":
            ncand_total = sum(columns[name])
    for name in header["masks"]:
        count = ncand_total if name.startswith("c_") else n
        mask = bytes(body[offset:offset + count])
        offset += count
        columns[name] = [v if m else None for v, m in zip(columns[name], mask)]
    if offset != len(body):
        raise ValueError("length mismatch")
    return columns


def _zip_tokens(header: dict[str, Any], c: dict[str, list[Any]]) -> list[dict[str, Any]]:
    texts = header.get("c_text")
    by_id = None if texts is not None else dict(zip(_undeltas(c["table_id"]), header["table_text"]))
    tokens, at = [], 0
    for i in range(header["n"]):
        cands = []
        for j in range(at, at + c["ncand"][i]):
            text = by_id[c["c_id"][j]] if by_id is not None else (texts or [])[j]
            cands.append({"id": c["c_id"][j], "text": text, "logprob": c["c_logprob"][j],
                          "sampled_prob": c["c_sampled_prob"][j]})
        at += c["ncand"][i]
        tokens.append({"index": c["index"][i], "id": c["id"][i], "text": header["text"][i],
                       "piece": header["piece"][i], "logprob": c["logprob"][i],
                       "sampled_prob": c["sampled_prob"][i], "rank": c["rank"][i],
                       "entropy": c["entropy"][i], "candidates": cands})
    return tokens


def _ints(columns: dict[str, array], name: str, values: list[int]) -> None:
    """int32 when every value fits, int64 otherwise (a hand-edited file may hold anything)."""
    fits = all(_INT32[0] <= v <= _INT32[1] for v in values)
    columns[name] = array("i" if fits else "q", values)


def _optional_ints(columns: dict[str, array], masks: dict[str, bytes], name: str, values: list[int | None]) -> None:
    if any(v is None for v in values):
        masks[name] = bytes(v is not None for v in values)
    _ints(columns, name, [0 if v is None else v for v in values])


def _floats(columns: dict[str, array], masks: dict[str, bytes], name: str, values: Iterable[float | None]) -> None:
    """float32 when every value comes back identical from it, float64 otherwise; a mask for None."""
    values = list(values)
    if any(v is None for v in values):
        masks[name] = bytes(v is not None for v in values)
    plain = [0.0 if v is None else float(v) for v in values]
    narrow = array("f", plain)
    exact = all(a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(narrow, plain))
    columns[name] = narrow if exact else array("d", plain)


def _text_table(cands: list[dict[str, Any]]) -> dict[int, str] | None:
    """{id: text} sorted by id when each candidate id always has the same text, else None
    (then every candidate's text is stored)."""
    table: dict[int, str] = {}
    for c in cands:
        if table.setdefault(c["id"], c["text"]) != c["text"]:
            return None
    return dict(sorted(table.items()))


def _deltas(values: list[int]) -> list[int]:
    """Sorted ids as differences: small numbers, which compress to a byte or two each."""
    return [b - a for a, b in zip([0, *values], values)]


def _undeltas(values: list[int]) -> list[int]:
    out, total = [], 0
    for v in values:
        total += v
        out.append(total)
    return out
