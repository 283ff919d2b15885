"""Command-line flags for every sampling parameter, validated by `SamplingParams` itself.

The flags only parse numbers; the ranges live in `engine.core.api.PARAM_LIMITS` and are enforced when
the `SamplingParams` is built, so the CLI refuses exactly what the config file and the TUI refuse.
Shared by ``logitscope run`` and ``logitscope bench``.
"""

from __future__ import annotations

import argparse
from typing import Callable, Mapping

from engine.core.api import PARAM_LIMITS, ParamError, SamplingParams
from engine.core.params import BY_NAME, ORDERS, STAGES, flags

# flag -> SamplingParams field (the flag names users know from mlx-lm and llama.cpp), from the one table
PARAM_FLAGS: Mapping[str, str] = flags()


def _number_type(kind: type) -> Callable[[str], int | float]:
    """argparse type that says 'a whole number' / 'a number' in its one-line complaint."""

    def parse(text: str) -> int | float:
        """Only the type: ranges are `SamplingParams`' job, so every door refuses the same."""
        try:
            return int(text) if kind is int else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{'a whole number' if kind is int else 'a number'}, got {text!r}")

    parse.__name__ = "whole number" if kind is int else "number"
    return parse


def add_param_flags(parser: argparse.ArgumentParser) -> None:
    """One optional flag per sampling parameter; unset flags keep the configured value."""
    group = parser.add_argument_group("sampling (defaults from [sampling] in the config)")
    for flag, name in PARAM_FLAGS.items():
        low, high, kind = PARAM_LIMITS[name]
        if kind is tuple:  # list-valued: text, checked by the table's own parser
            param = BY_NAME[name]
            group.add_argument(flag, dest=name, default=None, metavar=_LIST_METAVARS.get(name, "TEXT"),
                               action="append" if param.append else "store", help=_LIST_HELP.get(name, param.label))
            continue
        extra = "; -1 = a fresh random seed per turn" if name == "seed" else ""
        group.add_argument(flag, dest=name, type=_number_type(kind), default=None, metavar="N" if kind is int else "F",
                           help=f"{name.replace('_', ' ')} ({_bound(low, kind)} to {_bound(high, kind)}{extra})")


_LIST_METAVARS = {"logit_bias": "TOKEN=BIAS", "dry_sequence_breaker": "TEXT", "samplers": "ORDER"}
_LIST_HELP = {
    "logit_bias": "add BIAS (-100 to 100; -100 or 'ban' bans) to a token's logit, TOKEN its id or its text "
                  "(one token of the model; a phrase is refused); repeat the flag for more",
    "dry_sequence_breakers": "a text at which DRY's repetitions restart (repeat the flag; 'none': no breakers)",
    "samplers": f"the chain's order: {', '.join(ORDERS)}, or stage names joined by ';' ({';'.join(STAGES)})",
}


def _list_value(name: str, given: str | list[str]) -> object:
    """A list-valued flag's text (or, for a repeated flag, every given text) as the table parses it."""
    parse = BY_NAME[name].parse
    assert parse is not None
    try:
        if name == "dry_sequence_breakers":
            items = [i.replace("\\n", "\n").replace("\\t", "\t") for i in (given if isinstance(given, list) else [given])]
            return () if [i.strip().lower() for i in items] == ["none"] else tuple(items)
        return parse(",".join(given) if isinstance(given, list) else given)
    except ValueError as error:
        raise ParamError(f"{name} {error}") from None


def _bound(value: float, kind: type) -> str:
    """A range end as written: whole numbers in full (``9223372036854775807``, not ``9.22e+18``)."""
    return str(int(value)) if kind is int else f"{value:g}"


def text_biases(args: argparse.Namespace) -> tuple[tuple[str, float], ...]:
    """The ``--logit-bias TEXT=BIAS`` values (`tui.headless.bias`), resolved after the load."""
    from tui.headless.bias import split_bias_flags

    given = getattr(args, "logit_bias", None)
    return () if given is None else tuple(split_bias_flags(given)[1])


def params_from_args(args: argparse.Namespace, defaults: SamplingParams) -> SamplingParams:
    """`defaults` with every given flag applied; raises ParamError naming the flag."""
    params = defaults
    for flag, name in PARAM_FLAGS.items():
        value = getattr(args, name, None)
        if value is None:
            continue
        if name == "seed" and value == -1:
            value = None
        if name == "logit_bias":
            from tui.headless.bias import split_bias_flags

            value, _texts = split_bias_flags(value)  # the texts are resolved once the model is in
            if not value:
                continue
        try:
            if PARAM_LIMITS[name][2] is tuple:
                value = _list_value(name, value)
            params = params.with_changes(**{name: value})
        except ParamError as error:
            raise ParamError(f"{flag}: {error}") from error
    return params
