"""What the stage view asks the engine for one token (`engine.core.api.StageRequest`), or why not.

The request must describe the turn that drew the token, not the reply as it stands: a branch's
first tokens were copied from the version it left (and the one at `branched_at` chosen by hand),
so its turn started after them, continuing the partial reply; its parameter changes count from
that start. Pure, so it is tested without an app.
"""

from __future__ import annotations

from engine.core.api import Message, StageRequest
from engine.core.chat.conversation import Version


def stage_request(history: tuple[Message, ...], version: Version, index: int) -> StageRequest | str:
    """The request for token `index` of `version` (`history`: the messages before the reply, as
    the engine gets them), or the one line saying why this token has no stage view."""
    tokens = version.tokens or []
    if not 0 <= index < len(tokens):
        return "Select a token of a reply."
    if version.finish_reason is None:
        return "The stage view is computed once the reply has finished."
    if version.params is None or version.params.seed is None:
        return "This reply has no recorded parameters and seed: its draws cannot be replayed."
    start = version.turn_start if version.turn_start is not None else (
        0 if version.branched_at is None else version.branched_at + 1)
    if index < start:
        if index == version.branched_at:
            return "This token was chosen by hand (the branch starts here): no stage drew it."
        if version.branched_at is not None and index > version.branched_at:
            return "This token came from the preview the branch started from: its turn's stages are not kept."
        return "This token was copied from the version this branch left: its stage view is there."
    ids = tuple(t.id for t in tokens)
    messages, continue_last = history, False
    if start:
        prefix = Message("assistant", "".join(t.text for t in tokens[:start]), ids[:start], version.thinking)
        messages, continue_last = history + (prefix,), True
    candidates = tuple(c.id for c in tokens[index].candidates if c.id >= 0)
    changes = tuple((max(0, at - start), params) for at, params in version.changes)
    return StageRequest(messages, ids[start:index + 1], version.params, candidates, changes, continue_last,
                        version.thinking)
