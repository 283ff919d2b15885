"""A format-2 conversation document split for the library: the tree without its token lists
(small JSON), each reply's tokens as a blob (`blobs`), and the searchable summary.

The engine never imports the TUI, so this reads the document's plain dicts as
`engine.core.chat.fileformat.conversation_to_dict` writes them; the TUI checks a document whole with
`conversation_from_dict` when it opens one, so nothing here has to trust it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from engine.core.library.blobs import decode_tokens, encode_tokens
from engine.core.text import title_line
BLOB_KEY = "tokens_blob"  # a version's tokens, moved out: the index of its blob


@dataclass(frozen=True)
class Summary:
    """What the library lists and searches without opening a chat."""

    title: str
    messages: int  # on the visible branch
    text: str  # every message of every branch, for full-text search
    model_folder: str | None  # the last reply's model folder, when known


def split_document(doc: dict[str, Any]) -> tuple[dict[str, Any], list[bytes]]:
    """(skeleton, blobs): the document with each token list replaced by `{BLOB_KEY: i}`."""
    skeleton = copy.copy(doc)
    skeleton["nodes"] = []
    blobs: list[bytes] = []
    for node in doc.get("nodes") or []:
        node = dict(node)
        node["versions"] = [_split_version(v, blobs) for v in node.get("versions") or []]
        skeleton["nodes"].append(node)
    return skeleton, blobs


def _split_version(version: Any, blobs: list[bytes]) -> Any:
    if not isinstance(version, dict) or not isinstance(version.get("tokens"), list):
        return version
    try:
        blob = encode_tokens(version["tokens"])
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError):
        return version  # not the shape we pack (a hand-made file): kept as it is, inline
    out = {k: v for k, v in version.items() if k != "tokens"}
    out[BLOB_KEY] = len(blobs)
    blobs.append(blob)
    return out


def join_document(skeleton: dict[str, Any], blobs: list[bytes]) -> dict[str, Any]:
    """The inverse of `split_document` (BlobError for damaged token data)."""
    doc = dict(skeleton)
    doc["nodes"] = []
    for node in skeleton.get("nodes") or []:
        node = dict(node)
        node["versions"] = [_join_version(v, blobs) for v in node.get("versions") or []]
        doc["nodes"].append(node)
    return doc


def _join_version(version: Any, blobs: list[bytes]) -> Any:
    if not isinstance(version, dict) or BLOB_KEY not in version:
        return version
    out = {k: v for k, v in version.items() if k != BLOB_KEY}
    out["tokens"] = decode_tokens(blobs[version[BLOB_KEY]])
    return out


def summarize(doc: dict[str, Any]) -> Summary:
    """Title from the first user message, the visible branch's length, all text for search."""
    nodes = [n for n in doc.get("nodes") or [] if isinstance(n, dict)]
    texts = [doc.get("system_prompt") or ""]
    folder: str | None = None
    for node in nodes:
        for version in node.get("versions") or []:
            if isinstance(version, dict):
                texts.append(str(version.get("text") or ""))
                if node.get("role") == "assistant" and version.get("model"):
                    folder = str(version["model"])
    return Summary(_title(nodes), _visible_length(nodes), "\n".join(t for t in texts if t), folder)


def _title(nodes: list[dict[str, Any]]) -> str:
    for node in nodes:
        if node.get("role") == "user":
            versions = node.get("versions") or [{}]
            first = versions[0] if isinstance(versions[0], dict) else {}
            line = title_line(str(first.get("text") or ""))
            if line:
                return line
    return "(empty chat)"


def _visible_length(nodes: list[dict[str, Any]]) -> int:
    """Follow each node's active version down from the first node (flat format 2 links)."""
    child_of: dict[tuple[int, int], int] = {}
    for index, node in enumerate(nodes):
        parent = node.get("parent")
        if isinstance(parent, list) and len(parent) == 2:
            child_of[(parent[0], parent[1])] = index
    count, at, seen = 0, 0 if nodes else None, set()
    while at is not None and at not in seen and at < len(nodes):
        seen.add(at)
        count += 1
        active = nodes[at].get("active", 0)
        at = child_of.get((at, active if isinstance(active, int) else 0))
    return count


def tokens_elsewhere(skeleton: Any) -> Any:
    """The skeleton as the reader can check it: a version whose tokens sit in a blob holds an
    empty token list instead. Why not check the tokens too: they come out of `blobs`' typed
    columns, written from tokens that were checked (or the engine's own); reading them through the
    reader as well made opening a 50,000-token chat several times slower."""
    if not isinstance(skeleton, dict) or not isinstance(skeleton.get("nodes"), list):
        return skeleton
    nodes = []
    for node in skeleton["nodes"]:
        if isinstance(node, dict) and isinstance(node.get("versions"), list):
            versions = [{**{k: v for k, v in version.items() if k != BLOB_KEY}, "tokens": []}
                        if isinstance(version, dict) and BLOB_KEY in version else version for version in node["versions"]]
            node = {**node, "versions": versions}
        nodes.append(node)
    return {**skeleton, "nodes": nodes}
