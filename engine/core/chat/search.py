"""Search the whole chat, every branch (#30.6), and bring a match into view.

Pure tree work (no Textual): `find` lists every place a text occurs, case-insensitively, in
each version of each message (branches not on screen included), in reading order of the tree;
`reveal` makes a match's version the shown one, choosing on each message above it the version
that leads there, so the transcript can show it.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.chat.conversation import Conversation, Node

MAX_MATCHES = 10_000  # a one-letter search in a long chat: enough to walk, never a flood


@dataclass(frozen=True)
class Match:
    """One occurrence: the message, which of its versions, and where in that version's text."""

    node: Node
    version: int
    start: int
    end: int


def _text(node: Node, version: int) -> str:
    v = node.versions[version]
    return v.reply_text() if node.role == "assistant" else v.text


def find(conversation: Conversation, query: str) -> list[Match]:
    """Every occurrence of `query` (case-insensitive), messages in tree order, versions in order."""
    needle = query.casefold()
    if not needle:
        return []
    found: list[Match] = []
    for node in _tree_order(conversation):
        for index in range(len(node.versions)):
            hay = _text(node, index).casefold()
            at = hay.find(needle)
            while at >= 0 and len(found) < MAX_MATCHES:
                found.append(Match(node, index, at, at + len(needle)))
                at = hay.find(needle, at + max(1, len(needle)))
    return found


def _tree_order(conversation: Conversation) -> list[Node]:
    """Each message before what follows it: depth first, versions in order."""
    order: list[Node] = []
    stack = [conversation.root] if conversation.root is not None else []
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(v.child for v in reversed(node.versions) if v.child is not None)
    return order


def reveal(conversation: Conversation, match: Match) -> bool:
    """Show `match`: its version becomes the shown one, and so does, on every message above it,
    the version leading to it. False if the message is no longer in the chat."""
    chain = _chain_to(conversation.root, match.node)
    if chain is None:
        return False
    for node, version in chain:
        node.active = version
    match.node.active = match.version
    return True


def _chain_to(root: Node | None, target: Node) -> list[tuple[Node, int]] | None:
    """(message, version index) from the root down to the parent of `target`; None if absent."""
    stack: list[tuple[Node, list[tuple[Node, int]]]] = [(root, [])] if root is not None else []
    while stack:
        node, chain = stack.pop()
        if node is target:
            return chain
        for index, version in enumerate(node.versions):
            if version.child is not None:
                stack.append((version.child, [*chain, (node, index)]))
    return None
