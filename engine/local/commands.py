"""What callers ask of the engine thread (`engine.local.worker`): one frozen dataclass per command, each
with the `Sink` its answer goes to. Plain data, so the async facades (`engine.local.client`,
`engine.gguf`) and the thread share them without importing each other's machinery.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Union

from engine.core.api import (GenerateRequest, LoadProgress, Message, PreviewRequest, ProbeRequest, ScoreRequest,
                             StageRequest, TurnControl)

Sink = Callable[[object], None]  # receives events, a final result, or an EngineError instance


@dataclass(frozen=True)
class LoadCommand:
    """Load `spec` on the thread; the ModelInfo (or an EngineError) goes to `sink`, news to `on_progress`."""

    spec: str
    trust_remote_code: bool
    on_progress: Callable[[LoadProgress], None]
    sink: Sink


@dataclass(frozen=True)
class GenerateCommand:
    """Run one turn; `sink` gets each TokenEvent, then the TurnFinished or an EngineError.

    `control` is the caller's handle on the running turn (live parameters, cancel).
    """

    request: GenerateRequest
    control: TurnControl
    sink: Sink


@dataclass(frozen=True)
class PrepareCommand:
    """Prefill what the next turn after `messages` will share, its user message starting with
    `draft` (`engine.local.warmup`); `done` gets how many of those ids the cache then holds (0 when
    nothing could be warmed)."""

    messages: tuple[Message, ...]
    draft: str
    done: Callable[[int], None]
    thinking: bool | None = None  # the next turn's thinking switch (`GenerateRequest.thinking`)
    score_candidates: int | None = None  # the next turn's `GenerateRequest.score_candidates`


@dataclass(frozen=True)
class CountCommand:
    """Count the tokens of the prompt that answering `messages` would take; `sink` gets the
    count (an int) or an EngineError."""

    messages: tuple[Message, ...]
    sink: Sink
    thinking: bool | None = None  # the next turn's thinking switch (`GenerateRequest.thinking`)


@dataclass(frozen=True)
class PreviewCommand:
    """Preview candidates (`engine.local.preview`); `sink` gets each PreviewToken, then the
    PreviewFinished or an EngineError. It gives way as soon as another command is queued or
    `cancelled` is set (the caller left)."""

    request: PreviewRequest
    cancelled: threading.Event
    sink: Sink


@dataclass(frozen=True)
class ScoreCommand:
    """Score what a conversation or a text reads (`engine.local.scoring`); `sink` gets the Scored
    or an EngineError. `cancelled` (the caller left) stops it between chunks."""

    request: ScoreRequest
    cancelled: threading.Event
    sink: Sink


@dataclass(frozen=True)
class StagesCommand:
    """Recompute one token's stage view (`engine.local.stagerows`); `sink` gets the StageView or
    an EngineError."""

    request: StageRequest
    sink: Sink


@dataclass(frozen=True)
class ProbeCommand:
    """Probe phrases at a position (`engine.local.scoring`); `sink` gets the tuple of ProbeResults
    or an EngineError."""

    request: ProbeRequest
    sink: Sink


@dataclass(frozen=True)
class TokenizeCommand:
    """Split `text` with the loaded tokenizer (no special tokens); `sink` gets the ids (a tuple)
    or an EngineError."""

    text: str
    sink: Sink


@dataclass(frozen=True)
class StopCommand:
    """Ends the thread after everything queued before it."""


Command = Union[LoadCommand, GenerateCommand, PrepareCommand, CountCommand, PreviewCommand, ScoreCommand,
                ProbeCommand, StagesCommand, TokenizeCommand, StopCommand]
