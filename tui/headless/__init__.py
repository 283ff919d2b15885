"""The headless command line: `logitscope run` (`run`, its sampling flags in `params`, its output in
`output` and `previews`, the library's `--save`/`--continue` in `saved`), `logitscope list`,
`export` and `import` (`library`), and `--version` (`version`)."""

from tui.headless.run import main

__all__ = ["main"]
