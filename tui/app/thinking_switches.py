"""The chat's two thinking switches, as the controller holds them: whether the next replies
think, and how earlier replies' thinking enters the next prompts (with what each costs).

Kept apart from `tui.app.controller` (which talks to the engine and streams the turns) because
these are choices about the prompt, read by the status bar, the palette and the scope alike;
`ChatController` is a `ThinkingSwitches`, so every caller asks the controller as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui.app.widgets.thinking_fold import ThinkingBlock, thinking_block

if TYPE_CHECKING:
    from engine.core.api import EngineAPI
    from engine.core.chat.conversation import Conversation, Version


class ThinkingSwitches:
    """`thinking` and `past_thinking` (None: the template's way), and what they mean now."""

    if TYPE_CHECKING:  # what the controller provides
        engine: EngineAPI

        @property
        def conversation(self) -> Conversation: ...

        def prepare(self, draft: str = "", measure: bool = True) -> None: ...

    def __init__(self) -> None:
        self.thinking: bool | None = None  # the next replies' thinking switch (None: the template's default)
        self.past_thinking: bool | None = None  # drop earlier replies' thinking (None: as the template does)

    def toggle_thinking(self) -> str:
        """Switch thinking off (or back on) for the next replies; returns one line for the user.

        Why a switch per reply, not per chat: each reply keeps the switch it was written under
        (`Version.thinking`), so the history stays exactly what the model saw either way.
        """
        info = self.engine.model
        if info is None or not info.supports_thinking:
            return "This model's chat template has no thinking switch."
        self.thinking = self.thinking is False
        self.prepare()
        return f"Thinking {'on' if self.thinking else 'off'} for the next replies."

    @property
    def drops_past_thinking(self) -> bool:
        """Whether earlier replies' thinking goes "as the template renders it" (dropped where it
        drops it: re-read, not reused) rather than as the exact ids in the cache. Default: the
        template's way where the template drops it (Qwen3's does, and its model card asks so)."""
        info = self.engine.model
        default = info is not None and info.drops_past_thinking
        return default if self.past_thinking is None else self.past_thinking

    def toggle_past_thinking(self) -> str:
        """Switch how earlier replies' thinking enters the next prompts; one line for the user."""
        self.past_thinking = not self.drops_past_thinking
        self.prepare()
        if self.past_thinking:
            return ("Past thinking: as the template renders it (dropped where it drops it): less context, "
                    "but each reply that thought is read again on the next turn.")
        return "Past thinking: exact cache (kept as written): every earlier token is reused."

    def past_thinking_label(self) -> str:
        """The status bar's word on earlier replies' thinking and what it costs, counted on the
        visible chat: dropped, the last reply that thought is read again next turn (its answer)
        and its thinking leaves the context; kept, it stays (exact cache, reused)."""
        info = self.engine.model
        blocks: list[tuple[Version, ThinkingBlock]] = []  # the replies' closed thinking, in order
        for node in self.conversation.path():
            if node.role != "assistant":
                continue
            block = thinking_block(node.version.tokens or [], node.version.thinking_opened)
            if block is not None and block.closed:
                blocks.append((node.version, block))
        if not blocks and not (info and (info.supports_thinking or info.opens_thinking or info.drops_past_thinking)):
            return ""
        thought = sum(b.end for _v, b in blocks)
        if not self.drops_past_thinking:
            return f"past think kept (+{thought} ctx)" if blocks else "past think kept"
        if not blocks:
            return "past think dropped"
        last, block = blocks[-1]
        return f"past think dropped (re-read {len(last.tokens or []) - block.end}, -{thought} ctx)"

    def _opens_thinking(self) -> bool:
        """Whether the next reply's prompt ends inside a <think> (the template opens it, and the
        switch is not off): the reply then thinks from its first token."""
        info = self.engine.model
        return info is not None and info.opens_thinking and self.thinking is not False
