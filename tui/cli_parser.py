"""The one argument parser class behind every ``logitscope`` command line (the app's, ``run``,
``bench``, ``list``/``export``/``import``).

Why one class: argparse's defaults broke the project's rule that a bad input is one line, in two
ways that every parser shared. An unknown flag printed the whole usage block before the error;
and a negative number in scientific notation (``--presence-penalty -1e-1``) was taken for a flag,
because argparse recognises only ``-1`` and ``-.5`` as negative numbers. Fixing them here fixes
them for every command, and for every flag added later.

Kept free of heavy imports: the app's start-up parses its command line with it.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import NoReturn

# What `float()` takes for a negative number: -1, -1.5, -.5, -1., -1e-3, -1.5E+2, -inf. argparse's
# own matcher (r'^-\d+$|^-\d*\.\d+$') misses the exponent forms, -1. and -inf.
NEGATIVE_NUMBER = re.compile(r"^-(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf(?:inity)?)$", re.IGNORECASE)
_COMMAND = "_one_line_parser_command"  # the deepest (sub)command parsed: whose --help the hint names


class UsageError(Exception):
    """A bad command line; the message is one line, ending with where to look for help."""


class OneLineParser(argparse.ArgumentParser):
    """argparse with our two rules: a mistake raises `UsageError` (the caller prints one line, not
    usage plus error), and any number `float()` accepts is a value, negative or not.

    ``add_subparsers`` makes its parsers of this class too (argparse uses the parent's class).
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._negative_number_matcher = NEGATIVE_NUMBER
        self.set_defaults(**{_COMMAND: self.prog})  # a subcommand's default replaces its parent's

    def error(self, message: str) -> NoReturn:
        """argparse would print the usage and exit(2); the caller prints this one line instead."""
        raise UsageError(f"{message} (see '{self.prog} --help')")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """As argparse's, but an unknown flag after a subcommand names that subcommand's help
        (argparse reports it from the top parser: ``logitscope run --bogus`` pointed at
        ``logitscope --help``)."""
        parsed, extras = self.parse_known_args(args, namespace)
        command = getattr(parsed, _COMMAND, self.prog)
        if hasattr(parsed, _COMMAND):
            delattr(parsed, _COMMAND)
        if extras:
            raise UsageError(f"unrecognized arguments: {' '.join(extras)} (see '{command} --help')")
        return parsed


def nonblank(text: str) -> str:
    """An argparse type refusing an empty or all-blank value: ``--server ''`` names no server, and
    taken as "not given" it silently ran something else (the local model)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text
