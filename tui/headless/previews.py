"""``logitscope run --json --preview K:N``: each token line also says where its top K candidates lead.

A preview at position i continues the reply's first i ids with candidate c, so it can only be
asked once those ids exist, and the engine runs one command at a time: the turn's token lines are
held until the turn ends, then printed one by one, each as soon as its previews are computed
(`EngineAPI.preview`, with the [preview] settings: greedy, or the turn's parameters and a fixed
seed). Each preview is exactly what a branch at that candidate writes, so scripts can check it.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from engine.core.api import (
    EngineAPI,
    EngineError,
    GenerateRequest,
    Message,
    PreviewFinished,
    PreviewRequest,
    SamplingParams,
    TokenEvent,
    TurnFinished,
)
from engine.core.settings import PreviewConfig

MAX_K = 16
MAX_N = 256


@dataclass(frozen=True)
class PreviewSpec:
    """``--preview K:N``: the top `k` candidates of every token, `n` tokens each."""

    k: int
    n: int


class TokenPrinter(Protocol):
    """What of `tui.headless.output.Printer` this module uses."""

    def token(self, turn: int, event: TokenEvent, previews: list[dict[str, Any]] | None = None) -> None: ...

    def finished(self, turn: int, done: TurnFinished, params: SamplingParams) -> None: ...


def parse_preview(text: str) -> PreviewSpec:
    """``K:N`` as typed on the command line; a mistake is one line (argparse adds the flag)."""
    k, sep, n = text.partition(":")
    try:
        spec = PreviewSpec(int(k), int(n)) if sep else None
    except ValueError:
        spec = None
    if spec is None or not (1 <= spec.k <= MAX_K and 1 <= spec.n <= MAX_N):
        raise argparse.ArgumentTypeError(
            f"K:N, K candidates (1 to {MAX_K}) previewed N tokens each (1 to {MAX_N}), e.g. 3:12; got {text!r}")
    return spec


def preview_record(previews: PreviewFinished) -> list[dict[str, Any]]:
    """The ``previews`` list of a token's JSON line, best candidate first."""
    return [{"candidate": p.candidate, "ids": list(p.token_ids), "text": p.text, "finish_reason": p.finish_reason}
            for p in previews.previews]


async def previews_at(engine: EngineAPI, request: PreviewRequest) -> PreviewFinished:
    """One preview command, read to its end (closed however reading ends)."""
    async with contextlib.aclosing(engine.preview(request)) as stream:
        async for item in stream:
            if isinstance(item, PreviewFinished):
                return item
    raise EngineError("the engine ended previews without finishing them")


async def run_turn_with_previews(engine: EngineAPI, request: GenerateRequest, turn: int, printer: TokenPrinter,
                                 spec: PreviewSpec, config: PreviewConfig) -> TurnFinished:
    """Run the turn, then print each token line with the previews of its top `spec.k` candidates."""
    events: list[TokenEvent] = []
    done: TurnFinished | None = None
    async with contextlib.aclosing(engine.generate(request)) as stream:
        async for item in stream:
            if isinstance(item, TurnFinished):
                done = item
                break
            events.append(item)
    if done is None:
        raise EngineError("the engine ended a turn without finishing it")
    params = config.params(request.params).with_changes(max_tokens=spec.n)
    for position, event in enumerate(events):
        candidates = tuple(c.id for c in event.candidates[: spec.k])
        found = await previews_at(engine, _request(request.messages, events[:position], candidates, spec, params)) \
            if candidates else PreviewFinished((), 0.0)
        printer.token(turn, event, preview_record(found))
    printer.finished(turn, done, request.params)
    return done


def _request(messages: Sequence[Message], before: Sequence[TokenEvent], candidates: tuple[int, ...],
             spec: PreviewSpec, params: SamplingParams) -> PreviewRequest:
    """Previews after the reply's first tokens (`before`), as the branch at each candidate runs."""
    partial = Message("assistant", "".join(e.text for e in before), tuple(e.id for e in before))
    return PreviewRequest((*messages, partial), candidates, spec.n, params, params.seed or 0)
