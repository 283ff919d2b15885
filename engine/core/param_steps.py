"""Stepping and typing sampling parameters: pure functions over `engine.core.api.SamplingParams`.

Every result goes through `SamplingParams` itself, so the limits in `engine.core.api.PARAM_LIMITS`
are the only ones; a step that would leave them clamps, a typed value outside them is refused.
"""

from __future__ import annotations

from engine.core.api import PARAM_LIMITS, ParamError, SamplingParams

# The parameters the panel shows, in order, with a short label.
PANEL_PARAMS: tuple[tuple[str, str], ...] = (
    ("temperature", "temperature"),
    ("top_p", "top-p"),
    ("top_k", "top-k"),
    ("min_p", "min-p"),
    ("repetition_penalty", "rep. penalty"),
    ("max_tokens", "max tokens"),
    ("candidates", "candidates"),
    ("seed", "seed"),
)

# Fine linear steps for floats; ladders for ints whose useful values span orders of magnitude.
_FLOAT_STEPS = {"temperature": 0.1, "top_p": 0.05, "min_p": 0.01, "repetition_penalty": 0.05}
_LADDERS = {
    "top_k": (0, 1, 2, 3, 5, 10, 20, 40, 50, 100, 200, 500, 1000),
    "max_tokens": (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768),
    "candidates": tuple(range(0, 21)),
}


def _ladder_step(ladder: tuple[int, ...], value: int, direction: int) -> int:
    """The next rung above/below `value` (works for values between rungs too)."""
    if direction > 0:
        return next((rung for rung in ladder if rung > value), value)
    return next((rung for rung in reversed(ladder) if rung < value), value)


def step_param(params: SamplingParams, name: str, direction: int) -> SamplingParams:
    """`params` with `name` moved one step up (direction > 0) or down, clamped to its limits."""
    value = getattr(params, name)
    low, high, _ = PARAM_LIMITS[name]
    if name == "seed":
        new: object = (0 if direction > 0 else None) if value is None else value + direction
        if isinstance(new, int) and new < 0:
            new = None  # below 0 means "a fresh random seed each turn"
    elif name in _LADDERS:
        new = _ladder_step(_LADDERS[name], value, direction)
    else:
        new = round(min(high, max(low, value + direction * _FLOAT_STEPS[name])), 4)
    return params.with_changes(**{name: new})


def parse_param(params: SamplingParams, name: str, text: str) -> SamplingParams:
    """`params` with `name` set from what the user typed; raises `ParamError` (one line)."""
    text = text.strip()
    _, _, kind = PARAM_LIMITS[name]
    if name == "seed" and text.lower() in ("", "none", "random", "-1"):
        return params.with_changes(seed=None)
    try:
        value: object = int(text) if kind is int else float(text)
    except ValueError:
        noun = "a whole number" if kind is int else "a number"
        raise ParamError(f"{name} must be {noun}, got {text!r}") from None
    return params.with_changes(**{name: value})


def format_param(params: SamplingParams, name: str) -> str:
    """The value as the panel shows it (with what 'off' means where it applies)."""
    value = getattr(params, name)
    off = {"top_k": 0, "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0}
    if name == "seed" and value is None:
        return "random"
    text = f"{value:.2f}" if isinstance(value, float) else str(value)
    return f"{text} (off)" if name in off and value == off[name] else text


def apply_preset(params: SamplingParams, preset: dict[str, int | float | None]) -> SamplingParams:
    """`params` with a preset's values (already validated by the config loader)."""
    return params.with_changes(**preset)


def changes_note(start: SamplingParams, changes: list[tuple[int, SamplingParams]]) -> str:
    """What changed while a reply streamed, for its header (#30.6): "at token 12: temperature
    0.70→0.40" for the first change, "(+2 more)" for the rest; "" with no change (the seed,
    which a running reply keeps, is left out)."""
    if not changes:
        return ""
    at, after = changes[0]
    shown = [f"{label} {format_param(start, name)}→{format_param(after, name)}"
             for name, label in PANEL_PARAMS if name != "seed" and getattr(start, name) != getattr(after, name)]
    note = f"at token {at}: {', '.join(shown)}" if shown else f"changed at token {at}"
    return note + (f" (+{len(changes) - 1} more)" if len(changes) > 1 else "")
