"""The one table of sampling parameters: every other list of them is derived from it.

Each row says everything a door needs about one `engine.core.api.SamplingParams` field: its
limits and type (validation, config, saved files), the value that switches it off (the panel's
"(off)", what a remote request leaves out), its label (panel, palette, notices), its `run` flag,
its key in the panel (lower case steps down, upper case up; None: set from the palette's
"Set ..." only), how a step moves it (a fine step for floats, a ladder for values spanning orders
of magnitude) and its name on an OpenAI-style wire (None: not sent under a common name).

Why one table: a sampler used to be described in five places (limits, flags, keys, panel steps,
the "off" values, the wire's optional pairs) that had to be kept in step by hand; adding a
sampler is now one row here plus its stage in the sampling chain.

Pure data, no imports from the rest of the project, so `engine.core.api` can import it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    """One sampling parameter as every door sees it (see the module docstring)."""

    name: str
    kind: type  # int or float (a numeric knob); tuple for a list-valued one (its own parser)
    low: float
    high: float
    off: object  # the value that switches the stage off; None when no value does
    label: str
    flag: str | None  # `logitscope run` flag; None: none
    key: str | None = None  # panel key (lower: down, upper: up); None: palette only
    step: float | None = None  # float step in the panel
    ladder: tuple[int, ...] | None = None  # int rungs in the panel
    wire: str | None = None  # OpenAI-style request field, sent when not `off`
    panel: bool = True  # a row of the parameters panel


_TOP_K_LADDER = (0, 1, 2, 3, 5, 10, 20, 40, 50, 100, 200, 500, 1000)
_TOKENS_LADDER = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
_WINDOW_LADDER = (0, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)

# Panel order: the rows as the panel lists them, most used first.
PARAMS: tuple[Param, ...] = (
    Param("temperature", float, 0.0, 5.0, None, "temperature", "--temp", "t", step=0.1, wire="temperature"),
    Param("top_p", float, 0.0, 1.0, 1.0, "top-p", "--top-p", "p", step=0.05, wire="top_p"),
    Param("top_k", int, 0, 1_000_000, 0, "top-k", "--top-k", "k", ladder=_TOP_K_LADDER, wire="top_k"),
    Param("min_p", float, 0.0, 1.0, 0.0, "min-p", "--min-p", "m", step=0.01, wire="min_p"),
    Param("repetition_penalty", float, 0.5, 3.0, 1.0, "rep. penalty", "--repetition-penalty", "r", step=0.05,
          wire="repetition_penalty"),
    Param("repetition_context_size", int, 0, 1_000_000, None, "rep. window", "--repetition-context-size",
          ladder=_WINDOW_LADDER, panel=False),
    Param("presence_penalty", float, -5.0, 5.0, 0.0, "presence penalty", "--presence-penalty", step=0.1,
          wire="presence_penalty", panel=False),
    Param("frequency_penalty", float, -5.0, 5.0, 0.0, "frequency penalty", "--frequency-penalty", step=0.1,
          wire="frequency_penalty", panel=False),
    Param("max_tokens", int, 1, 1_000_000, None, "max tokens", "--max-tokens", "x", ladder=_TOKENS_LADDER,
          wire="max_tokens"),
    Param("candidates", int, 0, 100, None, "candidates", "--candidates", "c", ladder=tuple(range(0, 21))),
    Param("seed", int, 0, 2**63 - 1, None, "seed", "--seed", "s", wire="seed"),
)

BY_NAME: dict[str, Param] = {p.name: p for p in PARAMS}


def limits() -> dict[str, tuple[float, float, type]]:
    """name -> (lowest, highest, type): what validation, the config and the CLI check against."""
    return {p.name: (p.low, p.high, p.kind) for p in PARAMS}


def flags() -> dict[str, str]:
    """`run` flag -> field name."""
    return {p.flag: p.name for p in PARAMS if p.flag is not None}


def panel_params() -> tuple[tuple[str, str], ...]:
    """(name, label) of the panel's rows, in order."""
    return tuple((p.name, p.label) for p in PARAMS if p.panel)


def keys() -> dict[str, str]:
    """name -> panel key, for the parameters that have one."""
    return {p.name: p.key for p in PARAMS if p.key is not None}


def off_values() -> dict[str, object]:
    """name -> the value that switches it off, for the parameters that have one."""
    return {p.name: p.off for p in PARAMS if p.off is not None}


def wire_optional() -> dict[str, tuple[str, object]]:
    """name -> (wire name, off value) for what a request sends only when on."""
    return {p.name: (p.wire, p.off) for p in PARAMS if p.wire is not None and p.name not in _ALWAYS_SENT}


_ALWAYS_SENT = ("temperature", "max_tokens")  # a request always carries these two
