"""The headless command line: `logitscope run` (`run`) and its sampling flags (`params`)."""

from engine.cli.run import main

__all__ = ["main"]
