"""`logitscope run --save` and `--continue ID`: the headless chat in the conversation library.

`run` makes linear chats (one version per message), so this writes the same format-2 document
the app writes (`engine.core.chat.fileformat.conversation_to_dict`: nodes each naming their parent, every
reply with its tokens, candidates, parameters, seed, statistics and model folder) and reads back
the visible branch of any chat, the app's included. `tests/test_library_cli.py` proves both ways.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Callable

from engine.core.chat.conversation import Version
from engine.core.chat.fileformat import params_dict, token_to_dict, version_to_dict
from engine.core.api import Message, SamplingParams, TokenEvent, TurnFinished
from engine.core.library import ChatChanged, Library, LibraryError

STATS = ("prompt_tokens", "reused_tokens", "prefilled_tokens", "generated_tokens", "ttft_s", "prefill_tps",
         "decode_tps", "context_used", "context_limit")


token_dict = token_to_dict  # format 2's own spelling (engine.core.chat.fileformat)


SAVE_EVERY_S = 1.0  # a growing reply is committed at most this often: a SIGKILL loses about this much


class LinearChat:
    """A chat being written turn by turn, kept in the library as the app keeps its chats: the turn
    when it starts (the prompt and an empty reply), the reply as it grows (at most every
    `SAVE_EVERY_S`), and the reply cut short ("cancelled") when the run is interrupted.

    Why: `run --save` used to commit nothing until a reply ended, so Ctrl+C, SIGTERM or SIGKILL
    mid-reply lost the prompt and the partial reply. Each save is one library transaction."""

    def __init__(self, library: Library, model_spec: str, document: dict[str, Any] | None = None,
                 conversation_id: str | None = None, clock: Callable[[], float] = time.monotonic,
                 revision: float | None = None) -> None:
        """`revision`: the stored chat's `updated` when it was read (`Library.save_if`)."""
        self.library = library
        self.model_spec = model_spec
        self.document = document or {"format": 2, "system_prompt": "", "nodes": []}
        self.conversation_id = conversation_id
        tail = visible_path(self.document)[-1] if self.document["nodes"] else None
        # where this run's first message hangs: [node, version] of the chat's last shown message
        self._anchor = None if tail is None else [tail, self.document["nodes"][tail].get("active", 0)]
        self._mine: list[tuple[int, int]] = []  # (node, version) of each message this run wrote
        self._saved = 0  # how many of them the library holds
        self._revision = revision
        self.branched = False  # another writer changed the chat meanwhile: this run's turns became a branch
        self._reply: dict[str, Any] | None = None  # the streaming reply's version, until it ends
        self._clock = clock
        self._saved_at = 0.0
        self.problem: str | None = None  # why the library last refused a save (said once by the caller)

    def system(self, text: str) -> None:
        if not self.document["nodes"]:
            self.document["system_prompt"] = text

    def user(self, text: str) -> str | None:
        """Start a turn: the prompt and an empty reply, committed now; returns why the library
        refused, or None."""
        self._append("user", _version(text))
        self._reply = _version("", tokens=[])
        self._append("assistant", self._reply)
        return self.save_now()

    def token(self, event: TokenEvent) -> None:
        """One more token of the reply; committed when `SAVE_EVERY_S` has passed since the last save."""
        if self._reply is None:
            return
        self._reply["tokens"].append(token_dict(event))
        self._reply["text"] += event.text
        if self._clock() - self._saved_at >= SAVE_EVERY_S:
            self.save_now()

    def reply(self, done: TurnFinished, params: SamplingParams, model_folder: str | None) -> str | None:
        """Close the reply with what the engine reported (the parameters and seed it ran with) and
        commit the chat; returns why the library refused, or None."""
        reply = self._reply if self._reply is not None else _version("", tokens=[])
        stats = {name: getattr(done, name) for name in STATS}
        reply.update(text=done.text, params=params_dict(params), finish_reason=done.finish_reason, stats=stats,
                     model=model_folder)  # thinking None: the template's default
        self._reply = None
        return self.save_now()

    def cut(self, reason: str = "cancelled", model_folder: str | None = None) -> str | None:
        """The run stops mid-reply (a signal: "cancelled"; a failure: "error"): keep what arrived."""
        if self._reply is None:
            return None
        self._reply.update(finish_reason=reason, model=model_folder or self._reply.get("model"))
        self._reply = None
        return self.save_now()

    def save_now(self) -> str | None:
        """Commit the document; returns why the library refused, or None (and remembers it)."""
        self._saved_at = self._clock()
        try:
            self.save()
        except LibraryError as error:
            self.problem = str(error)
            return self.problem
        return None

    def save(self) -> str:
        """Commit the document, unless another writer changed the chat since this run last read or
        wrote it: then this run's messages are put into the chat as it is now, as a branch
        (`_rebased`), and committed so. Nothing either run wrote is lost."""
        if self.conversation_id is None:
            self.conversation_id = secrets.token_hex(6)
        for _ in range(3):  # each try re-reads the chat; a third writer racing us twice is unlikely
            try:
                self._revision = self.library.save_if(self.document, self.conversation_id, self._revision,
                                                      model_spec=self.model_spec)
                self._saved = len(self._mine)
                return self.conversation_id
            except ChatChanged:
                stored = self.library.load(self.conversation_id)
                self.document, self._revision = self._rebased(stored.document), stored.entry.updated
                self.branched = True
        raise LibraryError(f"chat {self.conversation_id} keeps changing under another logitscope; not saved")

    def _rebased(self, theirs: dict[str, Any]) -> dict[str, Any]:
        """The chat as another writer left it, with this run's messages in it: those the library
        had are written over their own places (a writer only ever adds nodes and versions), the
        rest hang where they hung. A message whose place already has another writer's message of
        the same role becomes a new version of it (a branch, shown: as the app shows a branch)."""
        nodes = theirs.get("nodes") or []
        mine: list[tuple[int, int]] = []
        for i, (node, version) in enumerate(self._mine):
            ours = self.document["nodes"][node]
            own = ours["versions"][version]
            if i < self._saved and node < len(nodes) and version < len(nodes[node]["versions"]):
                nodes[node]["versions"][version] = own
                mine.append((node, version))
                continue
            parent = self._anchor if i == 0 else list(mine[-1])
            sibling = next((j for j, n in enumerate(nodes) if n.get("parent") == parent and n.get("role") == ours["role"]),
                           None)
            if sibling is None:
                nodes.append({"parent": parent, "role": ours["role"], "active": 0, "versions": [own]})
                mine.append((len(nodes) - 1, 0))
            else:
                nodes[sibling]["versions"].append(own)
                nodes[sibling]["active"] = len(nodes[sibling]["versions"]) - 1
                mine.append((sibling, nodes[sibling]["active"]))
        theirs["nodes"] = nodes
        self._mine = mine
        return theirs

    def _append(self, role: str, version: dict[str, Any]) -> None:
        nodes = self.document["nodes"]
        parent = self._anchor if not self._mine else list(self._mine[-1])
        nodes.append({"parent": parent, "role": role, "active": 0, "versions": [version]})
        self._mine.append((len(nodes) - 1, 0))


def _version(text: str, tokens: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A format-2 version, spelled by the file format itself (`version_to_dict`): `tokens` None
    for a user message, a list for a reply (kept as dicts while it grows)."""
    version = version_to_dict(Version(text))
    version["tokens"] = tokens
    return version


def first_messages(system: str | None, chat: LinearChat | None, folder: str) -> list[Message]:
    """A continued chat's visible branch (its replies as ids when `folder` wrote them), or the
    system message of a new one."""
    if chat is not None and chat.document["nodes"]:
        return history(chat.document, folder)
    if chat is not None and system:
        chat.system(system)
    return [Message("system", system)] if system else []


def visible_path(document: dict[str, Any]) -> list[int]:
    """Indexes of the nodes on the visible branch: from the first, each active version's child."""
    nodes = document.get("nodes") or []
    child = {tuple(n["parent"]): i for i, n in enumerate(nodes) if isinstance(n.get("parent"), list)}
    path, at = [], 0 if nodes else None
    while at is not None and at not in path:
        path.append(at)
        at = child.get((at, nodes[at].get("active", 0)))
    return path


def history(document: dict[str, Any], model_folder: str | None) -> list[Message]:
    """The visible branch as the engine's messages; a reply carries its exact ids only when they
    are the loaded model's (its folder), as the app's `Conversation.messages` does."""
    out = [Message("system", document["system_prompt"])] if document.get("system_prompt") else []
    for index in visible_path(document):
        node = document["nodes"][index]
        version = node["versions"][node.get("active", 0)]
        tokens = version.get("tokens")
        fits = tokens is not None and version.get("model") is not None and version.get("model") == model_folder
        text = version.get("text") or ("".join(t["text"] for t in tokens) if tokens else "")
        out.append(Message(node["role"], text, tuple(t["id"] for t in tokens) if fits else None))
    return out


def open_chat(continue_id: str | None, model_spec: str) -> LinearChat:
    """The library chat `run` writes to: a new one, or the stored chat `continue_id` names.
    `LibraryError` (one line) when the library cannot be opened or has no such chat."""
    library = Library()
    if continue_id is None:
        return LinearChat(library, model_spec)
    stored = library.load(continue_id)
    try:
        visible_path(stored.document)
        history(stored.document, None)
    except (KeyError, TypeError, IndexError, AttributeError):
        raise LibraryError(f"chat {stored.entry.id} cannot be continued: its document is damaged") from None
    return LinearChat(library, model_spec, stored.document, stored.entry.id, revision=stored.entry.updated)


def saved_record(conversation_id: str) -> dict[str, str]:
    """`--json`'s last line after `--save`."""
    return {"type": "saved", "id": conversation_id}
