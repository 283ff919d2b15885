"""A conversation as JSON-able data, and back, checked whole before anything is built.

Saved files are shared and edited by hand, so a file is data to check, never to trust: every
field is read through `_Reader`, which names the first problem as one line ("nodes[3].versions[0]
.text: expected text, got 3") and raises `ValueError`; nothing is returned until the whole file
has passed, so a bad file can never replace the live chat half-way.

The tree is stored flat (format 2): a list of nodes, each naming its parent node and which of
the parent's versions it follows. Nothing here recurses, so no conversation is too long to save
or to read (format 1 nested each message inside the previous one: 332 messages hit Python's
recursion limit at quit). Format 1 files are still read, walked with an explicit stack.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any, Callable, TypeVar

from engine.core.api import Candidate, ParamError, SamplingParams, TokenEvent
from engine.core.chat.conversation import Conversation, Node, TurnStats, Version

FORMAT = 2
ROLES = ("system", "user", "assistant")
FINISH_REASONS = ("stop", "length", "cancelled", "error")
MAX_ID = 2**31 - 1  # a token id beyond this is no model's
MAX_COUNT = 2**53  # any other whole number (an index, a rank, a token count): exact as a float too
SLACK = 1e-3  # rounding a writer may have done: a logprob of 1e-7, a probability of 1.0000001
T = TypeVar("T")


# --- writing



def params_dict(params: SamplingParams) -> dict[str, Any]:
    """The parameters as JSON-native data: tuple-valued ones (the chain's order, biases, DRY's
    breakers) as lists, so a chat reads back from JSON or the library equal to what was written."""
    def native(value: Any) -> Any:
        return [native(item) for item in value] if isinstance(value, (tuple, list)) else value
    return {name: native(value) for name, value in params.__dict__.items()}

def conversation_to_dict(conversation: Conversation) -> dict[str, Any]:
    """Format 2: nodes in tree order (a parent before its children), each pointing up once."""
    nodes: list[dict[str, Any]] = []
    stack: list[tuple[Node, list[int] | None]] = [(conversation.root, None)] if conversation.root else []
    while stack:
        node, parent = stack.pop()
        index = len(nodes)
        nodes.append({"parent": parent, "role": node.role, "active": node.active,
                      "versions": [version_to_dict(v) for v in node.versions]})
        for slot in reversed(range(len(node.versions))):
            child = node.versions[slot].child
            if child is not None:
                stack.append((child, [index, slot]))
    return {"format": FORMAT, "system_prompt": conversation.system_prompt, "nodes": nodes}


def version_to_dict(v: Version) -> dict[str, Any]:
    """One version as format 2 keeps it: the one spelling of a version, for files, the library
    and `logitscope run`'s chats alike."""
    return {
        "text": v.text,
        "tokens": None if v.tokens is None else [token_to_dict(t) for t in v.tokens],
        "params": None if v.params is None else params_dict(v.params),
        # A reply still streaming when saved (quit, SIGHUP, SIGTERM) will never stream on.
        "finish_reason": "cancelled" if v.finish_reason is None and v.tokens is not None else v.finish_reason,
        "branched_at": v.branched_at,
        "stats": None if v.stats is None else dict(v.stats.__dict__),
        "model": v.model,
        "thinking": v.thinking,
        "changes": [{"at": at, "params": params_dict(params)} for at, params in v.changes],
    }


def token_to_dict(t: TokenEvent) -> dict[str, Any]:
    """One token as format 2 keeps it (every field, candidates as dicts)."""
    data = dict(t.__dict__)
    data["candidates"] = [dict(c.__dict__) for c in t.candidates]
    return data


# --- reading


def conversation_from_dict(data: object) -> Conversation:
    """Check and build; `ValueError` naming the first problem, and nothing built, otherwise."""
    return conversation_and_nodes(data)[0]


def conversation_and_nodes(data: object) -> tuple[Conversation, list[Node]]:
    """`conversation_from_dict`, and its nodes in the order the file lists them (format 2's
    "nodes"), for a reader that fills in what the file keeps elsewhere (the library's token blobs)."""
    top = _Reader(data, "file")
    top.require_dict()
    version = top.get("format", int, default=1)
    if version not in (1, FORMAT):
        raise ValueError(f"format: unknown version {version} (this logitscope reads 1 and {FORMAT})")
    system_prompt = top.get("system_prompt", str, default="")
    raw_nodes = _flatten_v1(top) if version == 1 else _flat_v2(top)
    nodes = [_node(r) for r in raw_nodes]
    _link(nodes, raw_nodes)
    return Conversation(system_prompt, nodes[0] if nodes else None), nodes


def _flat_v2(top: "_Reader") -> list["_Reader"]:
    nodes = top.field("nodes").items()
    for node in nodes:
        node.require_dict()
        node.parent = _parent_ref(node.field("parent"))
    return nodes


def _flatten_v1(top: "_Reader") -> list["_Reader"]:
    """Format 1's nested nodes as format 2's flat list, with an explicit stack (no recursion)."""
    root = top.field("root")
    if root.value is None:
        return []
    flat: list[_Reader] = []
    stack: list[tuple[_Reader, tuple[int, int] | None]] = [(root, None)]
    while stack:
        node, parent = stack.pop()
        node.require_dict()
        node.parent = parent
        index = len(flat)
        flat.append(node)
        for slot, version in enumerate(node.field("versions").items()):
            version.require_dict()
            child = version.field("child")
            if child.value is not None:
                stack.append((child, (index, slot)))
    return flat


def _node(r: "_Reader") -> Node:
    r.require_dict()
    role = r.get("role", str)
    if role not in ROLES:
        raise ValueError(f"{r.path}.role: expected one of {', '.join(ROLES)}, got {_show(role)}")
    versions = [_version(v, role) for v in r.field("versions").items()]
    if not versions:
        raise ValueError(f"{r.path}.versions: a message needs at least one version")
    active = r.get("active", int, default=0)
    if not 0 <= active < len(versions):
        raise ValueError(f"{r.path}.active: {active} is not a version (there are {len(versions)})")
    return Node(role, versions, active)  # type: ignore[arg-type]


def _link(nodes: list[Node], raw: list["_Reader"]) -> None:
    """Hang each node under the version its parent pointer names; exactly one root, first."""
    for index, (node, r) in enumerate(zip(nodes, raw)):
        parent = r.parent
        if parent is None:
            if index != 0:
                raise ValueError(f"{r.path}.parent: only the first message may have no parent")
            continue
        owner, slot = parent
        if not 0 <= owner < index:
            raise ValueError(f"{r.path}.parent: {owner} is not an earlier message")
        versions = nodes[owner].versions
        if not 0 <= slot < len(versions):
            raise ValueError(f"{r.path}.parent: message {owner} has no version {slot}")
        if versions[slot].child is not None:
            raise ValueError(f"{r.path}.parent: message {owner} version {slot} already has a follow-up")
        versions[slot].child = node


def _keys(r: "_Reader") -> set[str]:
    return set(r.value) if isinstance(r.value, dict) else set()


def _parent_ref(r: "_Reader") -> tuple[int, int] | None:
    if r.value is None:
        return None
    items = r.items()
    if len(items) != 2 or not all(_is_int(i.value) for i in items):
        raise ValueError(f"{r.path}: expected [message, version], got {_show(r.value)}")
    return items[0].value, items[1].value


def _version(r: "_Reader", role: str) -> Version:
    r.require_dict()
    tokens = r.optional("tokens", lambda t: [_token(x) for x in t.items()])
    finish = r.get("finish_reason", str, default=None)
    if finish is not None and finish not in FINISH_REASONS:
        raise ValueError(f"{r.path}.finish_reason: unknown reason {_show(finish)}")
    if finish is None and tokens is not None:
        finish = "cancelled"  # saved mid-reply (older versions wrote null): it will never stream on
    branched = r.count("branched_at", default=None)
    return Version(
        text=r.get("text", str, default=""), tokens=tokens, finish_reason=finish, branched_at=branched,
        params=r.optional("params", _params), stats=r.optional("stats", _stats),
        # A format 1 file without the tag: whose ids these are is unknown, so never spliced by id.
        model=r.get("model", str, default=None) if "model" in _keys(r) else "",
        thinking=r.get("thinking", bool, default=None),
        changes=r.optional("changes", lambda c: [_change(x) for x in c.items()]) or [],
    )


def _change(r: "_Reader") -> tuple[int, SamplingParams]:
    """One mid-reply parameter change: the token it applied from, and the parameters."""
    r.require_dict()
    at = r.get("at", int)
    if at < 0:
        raise ValueError(f"{r.path}.at: must not be negative, got {at}")
    return at, _params(r.field("params"))


def _token(r: "_Reader") -> TokenEvent:
    r.require_dict()
    return TokenEvent(
        index=r.count("index"), id=r.token_id("id", unknown=True), text=r.get("text", str), piece=r.get("piece", str),
        logprob=r.logprob("logprob"), sampled_prob=r.probability("sampled_prob"),
        rank=r.count("rank", default=None), entropy=r.maybe_number("entropy", low=0.0),
        candidates=_candidates(r.field("candidates")),
    )


def _candidates(r: "_Reader") -> tuple[Candidate, ...]:
    """A token's candidates. Why a fast path: a 2,000-message chat has tens of thousands of them,
    and the checked reader (a `_Reader` and a path string per value) took 0.5 s of its 0.85 s
    opening. A candidate the fast check does not accept is read again by the checked reader,
    which accepts or refuses it exactly as before and names the bad spot."""
    if not isinstance(r.value, list):
        r.items()  # raises, naming the spot
    out = []
    for i, value in enumerate(r.value):
        fast = _plain_candidate(value)
        out.append(fast if fast is not None else _candidate(_Reader(value, f"{r.path}[{i}]")))
    return tuple(out)


def _plain_candidate(value: object) -> Candidate | None:
    """The candidate when `value` is one in the plain form our writers use (an int id, a str,
    a float or null logprob at most 0, a float or null probability in 0..1), else None."""
    if type(value) is not dict:
        return None
    cid, text, logprob, prob = value.get("id"), value.get("text"), value.get("logprob", ...), value.get("sampled_prob")
    if type(cid) is not int or not (0 <= cid <= MAX_ID or cid == -1) or type(text) is not str:
        return None
    if logprob is None:
        logprob = -math.inf
    elif type(logprob) is not float or not (logprob == -math.inf or -math.inf < logprob <= SLACK):
        return None
    if prob is not None and (type(prob) is not float or not -SLACK <= prob <= 1.0 + SLACK):
        return None
    return Candidate(cid, text, logprob, prob)


def _candidate(r: "_Reader") -> Candidate:
    r.require_dict()
    return Candidate(r.token_id("id", unknown=True), r.get("text", str), r.logprob("logprob"),
                     r.probability("sampled_prob"))


def _params(r: "_Reader") -> SamplingParams:
    r.require_dict()
    known = set(SamplingParams.__dataclass_fields__)
    chosen = {k: v for k, v in r.value.items() if k in known}
    try:
        key = json.dumps(chosen, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        key = None  # not plain JSON values: checked below, uncached
    try:
        return _params_from(key) if key is not None else SamplingParams(**chosen)
    except ParamError as exc:
        raise ValueError(f"{r.path}: {exc}") from None


@functools.lru_cache(maxsize=256)
def _params_from(key: str) -> SamplingParams:
    """The parameters a JSON text spells, built (and checked) once: every reply of a chat
    usually has the same ones, and checking them took a quarter of a long chat's opening.
    SamplingParams is frozen, so the replies may share one."""
    return SamplingParams(**json.loads(key))


def _stats(r: "_Reader") -> TurnStats:
    r.require_dict()
    values = {name: r.number(name, low=0.0) for name in TurnStats.__dataclass_fields__}
    return TurnStats(**values)  # type: ignore[arg-type]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


_KINDS: dict[type, str] = {str: "text", int: "a whole number", dict: "an object", list: "a list"}


class _Reader:
    """One value of the file and where it sits (`path`), with typed accessors that name the spot."""

    def __init__(self, value: object, path: str) -> None:
        self.value: Any = value
        self.path = path
        self.parent: tuple[int, int] | None = None  # a node's (message, version) above it

    def require_dict(self) -> None:
        if not isinstance(self.value, dict):
            raise ValueError(f"{self.path}: expected an object, got {_show(self.value)}")

    def field(self, key: str) -> "_Reader":
        return _Reader(self.value.get(key), f"{self.path}.{key}")

    def items(self) -> list["_Reader"]:
        if not isinstance(self.value, list):
            raise ValueError(f"{self.path}: expected a list, got {_show(self.value)}")
        return [_Reader(v, f"{self.path}[{i}]") for i, v in enumerate(self.value)]

    def get(self, key: str, kind: type[T], default: Any = ...) -> T:
        """`key` as `kind` (bools are not numbers); `default` when absent or null, if given."""
        value = self.value.get(key)
        if value is None and default is not ...:
            return default  # type: ignore[no-any-return]
        ok = _is_int(value) if kind is int else isinstance(value, kind)
        if not ok:
            raise ValueError(f"{self.path}.{key}: expected {_KINDS.get(kind, kind.__name__)}, got {_show(value)}")
        return value  # type: ignore[return-value]

    def maybe_number(self, key: str, low: float | None = None) -> float | None:
        """`key` as a number, or null: what a remote server cannot tell (engine.core.api)."""
        return None if self.value.get(key) is None else self.number(key, low)

    def number(self, key: str, low: float | None = None, high: float | None = None) -> float:
        """A finite number (at least `low`, at most `high`, within `SLACK`). Range-checked, not
        only type-checked: a logprob of 1000.0 passed the type check and crashed the heatmap
        (``math.exp`` overflows), and an integer of 400 digits overflows any float."""
        value = self.value.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{self.path}.{key}: expected a number, got {_show(value)}")
        if isinstance(value, int) and abs(value) > MAX_COUNT or not math.isfinite(value):
            raise ValueError(f"{self.path}.{key}: expected a finite number, got {_show(value)}")
        if low is not None and value < low - SLACK or high is not None and value > high + SLACK:
            span = f"{low:g}..{high:g}" if low is not None and high is not None else \
                f"at least {low:g}" if low is not None else f"at most {high:g}"
            raise ValueError(f"{self.path}.{key}: {_show(value)} is out of range ({span})")
        return value

    def logprob(self, key: str) -> float:
        """A log-probability: at most 0 (within `SLACK`); null or -Infinity mean an impossible
        token (-inf), which strict JSON writes as null (`engine.core.strictjson`)."""
        value = self.value.get(key, ...)
        if value is None or (isinstance(value, float) and value == -math.inf):
            return -math.inf
        return self.number(key, high=0.0)

    def probability(self, key: str) -> float | None:
        """A probability in 0..1 (within `SLACK`), or null (unknown)."""
        return None if self.value.get(key) is None else self.number(key, 0.0, 1.0)

    def count(self, key: str, default: Any = ...) -> Any:
        """A whole number from 0 to `MAX_COUNT` (an index, a rank), or `default` when absent."""
        value = self.get(key, int, default)
        if value is not default and not 0 <= value <= MAX_COUNT:
            raise ValueError(f"{self.path}.{key}: {_show(value)} is out of range (0..2**53)")
        return value

    def token_id(self, key: str, *, unknown: bool = False) -> int:
        """A token id; with `unknown`, also -1: a token a remote server named by text only."""
        value = self.get(key, int)
        if unknown and value == -1:
            return value
        if not 0 <= value <= MAX_ID:
            raise ValueError(f"{self.path}.{key}: {value} is not a token id")
        return value

    def optional(self, key: str, build: Callable[["_Reader"], T]) -> T | None:
        child = self.field(key)
        return None if child.value is None else build(child)
