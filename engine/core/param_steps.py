"""Stepping and typing sampling parameters: pure functions over `engine.core.api.SamplingParams`.

Every result goes through `SamplingParams` itself, so the limits in `engine.core.api.PARAM_LIMITS`
are the only ones; a step that would leave them clamps, a typed value outside them is refused.
"""

from __future__ import annotations

from engine.core.api import PARAM_LIMITS, ParamError, SamplingParams
from engine.core.params import BY_NAME, off_values, panel_params

# The parameters the panel shows, in order, with a short label (from the one table).
PANEL_PARAMS: tuple[tuple[str, str], ...] = panel_params()
_OFF = off_values()


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
    elif (ladder := BY_NAME[name].ladder) is not None:
        new = _ladder_step(ladder, value, direction)
    else:
        step = BY_NAME[name].step
        assert step is not None, f"{name} has neither a step nor a ladder in engine.core.params"
        new = round(min(high, max(low, value + direction * step)), 4)
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
    if name == "seed" and value is None:
        return "random"
    text = f"{value:.2f}" if isinstance(value, float) else str(value)
    return f"{text} (off)" if name in _OFF and value == _OFF[name] else text


def apply_preset(params: SamplingParams, preset: dict[str, int | float | None]) -> SamplingParams:
    """`params` with a preset's values (already validated by the config loader)."""
    return params.with_changes(**preset)
