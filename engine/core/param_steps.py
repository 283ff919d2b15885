"""Stepping and typing sampling parameters: pure functions over `engine.core.api.SamplingParams`.

Every result goes through `SamplingParams` itself, so the limits in `engine.core.api.PARAM_LIMITS`
are the only ones; a step that would leave them clamps, a typed value outside them is refused.
"""

from __future__ import annotations

from engine.core.api import PARAM_LIMITS, ParamError, SamplingParams
from engine.core.params import BY_NAME, ORDERS, PARAMS, is_on, off_values, order_name, panel_params

# The parameters the panel shows, in order, with a short label (from the one table).
PANEL_PARAMS: tuple[tuple[str, str], ...] = panel_params()
# Every parameter a person may set (the palette's "Set ..."), with its label.
ALL_PARAMS: tuple[tuple[str, str], ...] = tuple((p.name, p.label) for p in PARAMS)
LABELS: dict[str, str] = dict(ALL_PARAMS)
_OFF = off_values()


def visible_params(params: SamplingParams) -> tuple[tuple[str, str], ...]:
    """The panel's rows for these values: the usual ones, then every other stage while it is on
    (so what the chain does is always in sight), its companions (DRY base, XTC threshold, ...) with it."""
    extra = []
    for p in PARAMS:
        if p.panel or p.name in ("samplers", "logit_bias", "dry_sequence_breakers"):
            continue
        lead = _COMPANION_OF.get(p.name, p.name)
        if p.name in _ALWAYS_WITH_PENALTIES or (BY_NAME[lead].off is not None and is_on(BY_NAME[lead], getattr(params, lead))):
            if p.name in _ALWAYS_WITH_PENALTIES and params.repetition_penalty == 1.0 and not (
                    params.presence_penalty or params.frequency_penalty):
                continue
            extra.append((p.name, p.label))
    return PANEL_PARAMS + tuple(extra)


_ALWAYS_WITH_PENALTIES = ("repetition_context_size",)  # the penalties' window: shown while a penalty is on
_COMPANION_OF = {"dry_base": "dry_multiplier", "dry_allowed_length": "dry_multiplier",
                 "dry_penalty_last_n": "dry_multiplier", "xtc_threshold": "xtc_probability",
                 "dynatemp_exponent": "dynatemp_range", "mirostat_tau": "mirostat", "mirostat_eta": "mirostat"}


def _ladder_step(ladder: tuple[int, ...], value: int, direction: int) -> int:
    """The next rung above/below `value` (works for values between rungs too)."""
    if direction > 0:
        return next((rung for rung in ladder if rung > value), value)
    return next((rung for rung in reversed(ladder) if rung < value), value)


def step_param(params: SamplingParams, name: str, direction: int) -> SamplingParams:
    """`params` with `name` moved one step up (direction > 0) or down, clamped to its limits."""
    value = getattr(params, name)
    low, high, kind = PARAM_LIMITS[name]
    if name == "samplers":  # the order steps through its presets
        names = list(ORDERS)
        at = names.index(order_name(value)) if order_name(value) in names else 0
        return params.with_changes(samplers=ORDERS[names[min(len(names) - 1, max(0, at + direction))]])
    if kind is tuple:
        return params  # a list is typed, not stepped
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
    parse = BY_NAME[name].parse
    if parse is not None:  # list-valued: the table's own parser
        try:
            return params.with_changes(**{name: parse(text)})
        except ValueError as error:
            raise ParamError(f"{name} {error}") from None
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
    show = BY_NAME[name].show
    if show is not None:
        return show(value)
    if name == "seed" and value is None:
        return "random"
    text = f"{value:.2f}" if isinstance(value, float) else str(value)
    return f"{text} (off)" if name in _OFF and value == _OFF[name] else text


def bias_step(params: SamplingParams, token: int, step: float | None) -> SamplingParams:
    """`params` with `token`'s logit bias moved by `step` (clamped to -100..100; 0 drops it from
    the list), or with `step` None banned (-100), a banned token unbanned."""
    biases = dict(params.logit_bias)
    current = biases.get(token, 0.0)
    if step is None:
        value = 0.0 if current <= -100.0 else -100.0
    else:
        value = min(100.0, max(-100.0, current + step))
    if value == 0.0:
        biases.pop(token, None)
    else:
        biases[token] = value
    return params.with_changes(logit_bias=tuple(biases.items()))


def typed_value(params: SamplingParams, name: str) -> str:
    """The value as the "Set ..." dialog starts with it (what `parse_param` reads back)."""
    value = getattr(params, name)
    if name == "samplers":
        return order_name(value)
    if name == "logit_bias":
        return ", ".join(f"{t}={'ban' if b <= -100 else f'{b:g}'}" for t, b in value)
    if name == "dry_sequence_breakers":
        return ", ".join(v.replace("\\", "\\\\").replace("\n", "\\n").replace(",", "\\,") for v in value)
    return "" if value is None else str(value)


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
