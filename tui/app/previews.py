"""What-if previews in the app: asked once the token cursor rests, streamed in, cached, reused.

Why a helper beside the controller: previews are a second, optional conversation with the engine
(`EngineAPI.preview`) with their own timing (a rest of `[preview] delay_ms` before asking, so
arrowing through a reply asks nothing) and their own memory (a cache, so going back is instant).
The engine runs them only while no turn is queued, so they never delay a reply.

A preview is cached under exactly what it was computed from: the request's messages (the
conversation up to the reply, plus the reply's first tokens), the candidate, the parameters and
the length. Any change to the conversation makes a different key; `drop` also frees the lot
whenever a turn starts. Only finished rows are kept: rows a turn cut short are asked again.

A refusal (a reply that fills the context: "no room to preview"; an engine without previews)
applies to its request only (#30.3): it is remembered for that request, so the same token is not
asked again, and said once per reason; other tokens are still asked. Previews are off only when
the user turns them off (`enabled`: the palette's "Previews on/off", or `[preview] candidates = 0`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from textual.message import Message as TextualMessage

from engine.core.api import (
    EngineAPI,
    EngineError,
    Message,
    PreviewFinished,
    PreviewRequest,
    PreviewToken,
    SamplingParams,
    TokenEvent,
)
from engine.core.settings import PreviewConfig

FLUSH_HZ = 20.0  # redraws a second while previews stream (each row grows a token per step)
CACHE_LIMIT = 512  # previewed candidates kept; the oldest go first

Post = Callable[[TextualMessage], object]
Key = tuple[tuple[Message, ...], int, SamplingParams, int]


@dataclass(eq=False)
class PreviewsChanged(TextualMessage):
    """Previews of `request`'s token grew or finished (the screen shows them if it still shows that
    token); a newer change of the same request replaces one still queued."""

    request: PreviewRequest

    def can_replace(self, message: TextualMessage) -> bool:
        return isinstance(message, PreviewsChanged) and message.request is self.request


@dataclass
class PreviewRow:
    """One candidate's preview as shown: its tokens so far, and whether it is complete."""

    candidate: int
    tokens: list[PreviewToken] = field(default_factory=list)
    done: bool = False
    problem: str = ""  # why the engine refused this row's request (then `done` and no tokens)

    @property
    def text(self) -> str:
        return "".join(token.text for token in self.tokens)


class Previews:
    """Owns the preview requests of one screen: timing, the running stream, the cache."""

    def __init__(self, engine: EngineAPI, post: Post, config: PreviewConfig) -> None:
        self.engine = engine
        self.config = config
        self._post = post
        self._cache: dict[Key, PreviewRow] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._last_post = 0.0
        self.enabled = config.candidates > 0  # the user's switch (the palette toggles it)
        self.problem = ""  # why the latest refused request was refused

    @property
    def off(self) -> bool:
        return not self.enabled

    @property
    def count(self) -> int:
        """Candidates previewed per token: the configured number (3 when the config says 0 and
        the user turned previews on from the palette)."""
        return self.config.candidates or PreviewConfig().candidates

    def toggle(self) -> bool:
        """Turn previews off (stopping what runs) or on again; whether they are on now."""
        self.enabled = not self.enabled
        if not self.enabled:
            self.stop()
        return self.enabled

    def request_for(self, messages: tuple[Message, ...], tokens: list[TokenEvent], index: int,
                    params: SamplingParams, thinking: bool | None = None) -> PreviewRequest | None:
        """The preview request for token `index` of a reply written under the `thinking` switch
        (None when it has no candidates): its prompt is the one the reply had."""
        if self.off or not 0 <= index < len(tokens) or not tokens[index].candidates:
            return None
        before = tokens[:index]
        partial = Message("assistant", "".join(t.text for t in before), tuple(t.id for t in before), thinking)
        candidates = tuple(c.id for c in tokens[index].candidates[: self.count])
        preview_params = self.config.params(params)
        if adoptable(preview_params, params):  # a branch may start from it: every token's statistics too
            preview_params = preview_params.with_changes(candidates=params.candidates)
        return PreviewRequest((*messages, partial), candidates, self.config.tokens, preview_params, self.config.seed)

    def rows(self, request: PreviewRequest) -> list[PreviewRow]:
        """What is known for each candidate of `request`, in its order (empty rows not yet asked)."""
        return [self._cache.get(self._key(request, c)) or PreviewRow(c) for c in request.candidates]

    def complete(self, request: PreviewRequest, candidate: int) -> PreviewRow | None:
        """The finished preview of `candidate`, if there is one (a branch can start from it)."""
        row = self._cache.get(self._key(request, candidate))
        return row if row is not None and row.done and not row.problem else None

    def rest_on(self, request: PreviewRequest | None) -> None:
        """The cursor moved to `request`'s token: ask after the rest delay, unless all is cached.
        Whatever was asked or running for another token is dropped (the engine is freed)."""
        self.stop()
        if request is None:
            return
        if all(row.done for row in self.rows(request)):
            self._post(PreviewsChanged(request))
            return
        delay = self.config.delay_ms / 1000
        self._timer = asyncio.get_running_loop().call_later(delay, self._start, request)

    def stop(self) -> None:
        """Cancel the pending ask and the running previews (their unfinished rows are forgotten)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None

    def drop(self) -> None:
        """The conversation changed (a turn starts): stop, and forget every preview."""
        self.stop()
        self._cache.clear()

    def _start(self, request: PreviewRequest) -> None:
        self._timer = None
        model = self.engine.model
        if model is not None and not model.abilities.previews:  # declared at load: never asked
            # Said once (per reason) and nothing asked; not switched off for good: the next model
            # may preview (before #30.3 one refusal turned previews off for the session).
            self.problem = model.abilities.reason("previews") or "This model has no previews."
            self._changed(request, final=True)
            return
        missing = tuple(c for c in request.candidates if not self._cached_done(request, c))
        if missing:
            self._task = asyncio.create_task(self._run(request, missing))

    def _cached_done(self, request: PreviewRequest, candidate: int) -> bool:
        """Finished, or refused: nothing more to ask for this candidate of this request."""
        row = self._cache.get(self._key(request, candidate))
        return row is not None and row.done

    async def _run(self, shown: PreviewRequest, missing: tuple[int, ...]) -> None:
        """Stream the missing rows into the cache; a refusal is kept on this request's rows only."""
        request = PreviewRequest(shown.messages, missing, shown.tokens, shown.params, shown.seed)
        rows = {c: PreviewRow(c) for c in missing}
        for candidate, row in rows.items():
            self._remember(self._key(request, candidate), row)
        try:
            async with contextlib.aclosing(self.engine.preview(request)) as stream:
                async for item in stream:
                    if isinstance(item, PreviewToken):
                        rows[item.candidate].tokens.append(item)
                        self._changed(shown, final=False)
                    elif isinstance(item, PreviewFinished):
                        self._finish(request, rows, item)
                        self._changed(shown, final=True)
        except EngineError as exc:
            self.problem = str(exc)
            for row in rows.values():
                if not row.done:
                    row.tokens.clear()
                    row.done, row.problem = True, self.problem
            self._changed(shown, final=True)
        except asyncio.CancelledError:
            self._forget(request, rows)
            raise

    def _finish(self, request: PreviewRequest, rows: dict[int, PreviewRow], done: PreviewFinished) -> None:
        """Keep the rows that ran to their end; forget those cut short (asked again next time)."""
        for preview in done.previews:
            row = rows.get(preview.candidate)
            if row is None:
                continue
            if preview.finish_reason == "cancelled":
                self._cache.pop(self._key(request, preview.candidate), None)
            else:
                row.done = True

    def _forget(self, request: PreviewRequest, rows: dict[int, PreviewRow]) -> None:
        for candidate, row in rows.items():
            if not row.done:
                self._cache.pop(self._key(request, candidate), None)

    def _changed(self, request: PreviewRequest, final: bool) -> None:
        """Tell the screen, at most `FLUSH_HZ` times a second while rows stream."""
        now = time.monotonic()
        if final or now - self._last_post >= 1.0 / FLUSH_HZ:
            self._last_post = now
            self._post(PreviewsChanged(request))

    def _remember(self, key: Key, row: PreviewRow) -> None:
        self._cache[key] = row
        while len(self._cache) > CACHE_LIMIT:
            del self._cache[next(iter(self._cache))]

    @staticmethod
    def _key(request: PreviewRequest, candidate: int) -> Key:
        return (request.messages, candidate, request.params.with_changes(seed=request.seed), request.tokens)


def adoptable(preview: SamplingParams, reply: SamplingParams) -> bool:
    """Whether a branch at `reply`'s parameters would draw exactly what a preview at `preview`'s
    drew: only when both are deterministic and otherwise alike. At a sampling temperature a
    preview is one draw (greedy by default, or with the preview's fixed seed): a branch starting
    from it would be greedy under a header saying T=0.70, and choosing the same candidate twice
    would start both branches alike (#30.2), so such a branch draws afresh."""
    same = preview.with_changes(candidates=reply.candidates, max_tokens=reply.max_tokens, seed=reply.seed)
    return reply.temperature == 0.0 and same == reply


def branch_tokens(row: PreviewRow, first_index: int) -> list[TokenEvent]:
    """A finished preview as reply tokens (from `first_index` on), each with every statistic the
    engine computed for it; [] unless every token has them (a preview drawn for a glance only:
    the branch then computes its tokens itself, so no token of a reply is second-class)."""
    if not row.tokens or any(t.stats is None for t in row.tokens):
        return []
    return [replace(t.stats, index=first_index + i) for i, t in enumerate(row.tokens) if t.stats is not None]
