"""The sampling knobs as the engine takes them (`SamplingParams`, checked on construction, so a
bad value never applies) and what a caller may change while its turn runs (`TurnControl`).
Part of the engine's door: `engine.core.api` says what the chain does with them."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, fields, replace

from engine.core import params as _param_table
from engine.core.text import typed_value


class ParamError(ValueError):
    """An out-of-range or malformed sampling parameter; the message is one line for the user."""


@dataclass(frozen=True)
class SamplingParams:
    """Every knob of the sampling chain. Validated on construction, so a bad value never applies.

    Limits are generous but finite, so a typo is refused instead of silently doing nothing.
    """

    temperature: float = 0.7
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1.0 = off
    min_p: float = 0.0  # 0.0 = off
    repetition_penalty: float = 1.0  # 1.0 = off
    repetition_context_size: int = 64  # window over the whole conversation, cached history included
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None  # None = a fresh random seed per turn
    max_tokens: int = 512
    candidates: int = 10  # top-N alternatives per token; 0 = off
    # The samplers beyond the classic ones, with llama.cpp's names and defaults (`engine.core.params`).
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias); a bias of -100 bans the token
    dry_multiplier: float = 0.0  # 0 = off
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = 64  # -1 = the whole conversation
    dry_sequence_breakers: tuple[str, ...] = ("\n", ":", "\"", "*")
    top_n_sigma: float = 0.0  # 0 = off
    typical_p: float = 1.0  # 1 = off
    xtc_probability: float = 0.0  # 0 = off
    xtc_threshold: float = 0.1  # above 0.5: off
    dynatemp_range: float = 0.0  # 0 = off
    dynatemp_exponent: float = 1.0
    mirostat: int = 0  # 0 = off, 2 = mirostat v2 (replaces the filters and the draw)
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    samplers: tuple[str, ...] = _param_table.LLAMA_CPP_ORDER  # the chain's order (llama.cpp's names)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "seed" and value is None:
                continue
            check = _param_table.BY_NAME[f.name].check
            if check is not None:  # list-valued: its own rules, stored as tuples (hashable, frozen)
                try:
                    object.__setattr__(self, f.name, check(value))
                except ValueError as error:
                    raise ParamError(f"{f.name} {error}") from None
                continue
            low, high, kind = PARAM_LIMITS[f.name]
            if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
                raise ParamError(f"{f.name} must be a whole number, got {_short(value)}")
            if kind is float:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ParamError(f"{f.name} must be a number, got {_short(value)}")
                if isinstance(value, float) and not math.isfinite(value):
                    raise ParamError(f"{f.name} must be a finite number, got {_short(value)}")
            if not low <= value <= high:
                raise ParamError(f"{f.name} must be between {low} and {high}, got {_short(value)}")
        if self.mirostat == 1:
            raise ParamError("mirostat 1 is not offered: 2 is mirostat v2, 0 is off")

    def with_changes(self, **changes: object) -> "SamplingParams":
        """A validated copy with some fields changed (raises `ParamError` on a bad value)."""
        return replace(self, **changes)  # type: ignore[arg-type]


_short = typed_value  # engine.core.text: the one shortener of typed values


# name -> (lowest, highest, type), derived from the one table (`engine.core.params`).
PARAM_LIMITS: dict[str, tuple[float, float, type]] = _param_table.limits()


@dataclass
class TurnControl:
    """What a caller may change while its turn runs: shared between two threads.

    `params` is replaced whole (never mutated), which is atomic; the decode loop picks up the
    new object before sampling its next token. `cancelled` is checked between tokens.
    """

    params: SamplingParams
    cancelled: threading.Event = field(default_factory=threading.Event)
