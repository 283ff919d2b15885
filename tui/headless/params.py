"""Command-line flags for every sampling parameter, validated by `SamplingParams` itself.

The flags only parse numbers; the ranges live in `engine.core.api.PARAM_LIMITS` and are enforced when
the `SamplingParams` is built, so the CLI refuses exactly what the config file and the TUI refuse.
Shared by ``logitscope run`` and ``logitscope bench``.
"""

from __future__ import annotations

import argparse
from typing import Callable, Mapping

from engine.core.api import PARAM_LIMITS, ParamError, SamplingParams
from engine.core.params import flags

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
        extra = "; -1 = a fresh random seed per turn" if name == "seed" else ""
        group.add_argument(flag, dest=name, type=_number_type(kind), default=None, metavar="N" if kind is int else "F",
                           help=f"{name.replace('_', ' ')} ({_bound(low, kind)} to {_bound(high, kind)}{extra})")


def _bound(value: float, kind: type) -> str:
    """A range end as written: whole numbers in full (``9223372036854775807``, not ``9.22e+18``)."""
    return str(int(value)) if kind is int else f"{value:g}"


def params_from_args(args: argparse.Namespace, defaults: SamplingParams) -> SamplingParams:
    """`defaults` with every given flag applied; raises ParamError naming the flag."""
    params = defaults
    for flag, name in PARAM_FLAGS.items():
        value = getattr(args, name, None)
        if value is None:
            continue
        if name == "seed" and value == -1:
            value = None
        try:
            params = params.with_changes(**{name: value})
        except ParamError as error:
            raise ParamError(f"{flag}: {error}") from error
    return params
