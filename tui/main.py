"""The `logitscope` console script.

``logitscope [--model SPEC] [--config PATH] [--trust-remote-code] [--gguf-threads N]`` opens the TUI
(`tui.app`); ``logitscope run|score|list|export|import ...`` are the headless commands (`tui.headless`),
``logitscope convert FILE.gguf DIR`` writes a GGUF file as an MLX folder (`tui.headless.convert`)
and ``logitscope bench ...`` the benchmark (`tui.bench`), each imported only when asked for, so
the TUI starts without them. Every front end gets its engine from `engine.factory.build_engine`.
``--fake-engine`` (or LOGITSCOPE_FAKE_ENGINE=1), hidden from --help, swaps the model for the
scripted test double: the tmux test and screenshots use it so they need no weights.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Sequence

from tui.cli_parser import UsageError
from tui.launch import _parser, _use_fake, build_app, parse_args  # noqa: F401 - _parser, _use_fake: tested here
from tui.splash import paint_splash

if TYPE_CHECKING:
    from tui.app.application import LogitscopeApp

def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("list", "export", "import"):  # the conversation library (tui.headless.library)
        from tui.headless.library import main as library_main

        return library_main(argv)
    if argv[:1] == ["convert"]:  # a GGUF file as an MLX folder
        from tui.headless.convert import main as convert_main

        return convert_main(argv)
    if argv[:1] == ["bench"]:
        from tui.bench import main as bench_main

        return bench_main(argv[1:])
    if argv[:1] == ["run"]:
        from tui.headless import main as run_main

        return run_main(argv)
    if argv[:1] == ["score"]:  # a text's tokens and perplexity, as JSON lines (tui.headless.score)
        from tui.headless.score import main as score_main

        return score_main(argv)
    try:
        args = parse_args(argv)
    except UsageError as error:
        return _usage_failed(error)
    if args.version:  # the engine's own report: the TUI may not look inside the engine
        from tui.headless import version

        return version.main()
    leave = paint_splash(sys.stdout, args.model or "the configured model") if sys.stdout.isatty() else None

    def refuse(line: str) -> None:
        """A bad flag: off the splash first, so the line stays on the user's screen."""
        if leave is not None:
            leave()
        print(f"logitscope: {line}", file=sys.stderr)
    app = build_app(args, refuse)
    if isinstance(app, int):
        return app
    from tui.app.application import tune_for_streaming

    tune_for_streaming()
    app.run()
    return after_exit(app)


def _usage_failed(error: UsageError) -> int:
    """A bad command line: one line on stderr (control characters made visible, long values cut)."""
    from engine.core.text import printable, shortened

    print(shortened("logitscope: " + printable(" ".join(str(error).split()))), file=sys.stderr)
    return 2


def after_exit(app: "LogitscopeApp") -> int:
    """Once the terminal is restored: say what the screen no longer could (a save that failed),
    and never wait on an engine thread that did not stop (interpreter exit would join it)."""
    code = app.return_code or 0
    if app.exit_note:
        print(app.exit_note, file=sys.stderr)
    if app.engine_stuck:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
