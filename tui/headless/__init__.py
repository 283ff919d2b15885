"""The headless command line: `logitscope run` (`run`) and its sampling flags (`params`)."""

from tui.headless.run import main

__all__ = ["main"]
