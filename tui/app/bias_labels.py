"""The text of each biased token, for the parameters panel's labelled list of biases (#32.4).

A bias is stored by id (in the live parameters and in every reply's saved parameters). Its text
is known where it was set (the candidates panel's row); a bias that came another way (the
palette's "Set logit bias", a config, a preset, a chat reopened after a restart) finds its text
in the chat itself: any token or candidate with that id in the replies shown. None found: the
list shows the id alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.core.chat.conversation import Conversation


def bias_labels(ids: Iterable[int], known: dict[int, str], conversation: Conversation) -> dict[int, str]:
    """id -> text for every id in `ids` whose text is `known` or appears in `conversation`."""
    wanted = [token for token in ids if token not in known]
    out = {token: known[token] for token in ids if token in known}
    if not wanted:
        return out
    seen: dict[int, str] = {}
    for node in conversation.path():
        for token in node.version.tokens or ():
            seen.setdefault(token.id, token.piece or token.text)
            for cand in token.candidates:
                seen.setdefault(cand.id, cand.text)
    out.update({token: seen[token] for token in wanted if token in seen})
    return out
