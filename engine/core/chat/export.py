"""The chat as text to take elsewhere: a message for the clipboard, the visible
branch as Markdown, everything as JSON (the README's exchange format). Textual-free: the app's
copy and export commands and `logitscope export` share it."""

from __future__ import annotations

from typing import Any

from engine.core import strictjson
from engine.core.chat.conversation import Conversation, Node
from engine.core.chat.fileformat import conversation_to_dict
from engine.core.text import title_line

Cursor = tuple[Node, int] | None


def message_text(conversation: Conversation, cursor: Cursor) -> str | None:
    """The message holding the token cursor, else the last message shown (None: an empty chat)."""
    if cursor is not None:
        return cursor[0].version.reply_text()
    path = conversation.path()
    return path[-1].version.reply_text() if path else None


def markdown(title: str, conversation: Conversation) -> str:
    """The visible branch, a heading per message, the text as it reads."""
    lines = [f"# {title}", ""]
    if conversation.system_prompt:
        lines += ["## System", "", conversation.system_prompt, ""]
    for node in conversation.path():
        lines += [f"## {node.role.capitalize()}", "", node.version.reply_text(), ""]
    return "\n".join(lines)


def exchange_json(title: str, model_spec: str | None, document: dict[str, Any]) -> str:
    """Format 2 (every branch, token and candidate) plus the library's title and model spec;
    `conversation_from_dict` reads it back (extra keys are ignored)."""
    return strictjson.dumps({**document, "title": title, "model_spec": model_spec}, ensure_ascii=False)


def conversation_json(title: str, model_spec: str | None, conversation: Conversation) -> str:
    return exchange_json(title, model_spec, conversation_to_dict(conversation))


def default_title(conversation: Conversation) -> str:
    """As the library names a chat: its first user message, on one line."""
    first = next((n for n in conversation.path() if n.role == "user"), None)
    return title_line(first.versions[0].text if first is not None else "") or "(empty chat)"
