"""The `logitscope` console script.

``logitscope [--model SPEC] [--config PATH] [--trust-remote-code] [--gguf-threads N]`` opens the TUI
(`tui.app`); ``logitscope run|list|export|import ...`` are the headless commands (`tui.headless`),
``logitscope convert FILE.gguf DIR`` writes a GGUF file as an MLX folder (`tui.headless.convert`)
and ``logitscope bench ...`` the benchmark (`tui.bench`), each imported only when asked for, so
the TUI starts without them. Every front end gets its engine from `engine.factory.build_engine`.
``--fake-engine`` (or LOGITSCOPE_FAKE_ENGINE=1), hidden from --help, swaps the model for the
scripted test double: the tmux test and screenshots use it so they need no weights.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from tui.splash import paint_splash

from tui.cli_parser import OneLineParser, UsageError, nonblank

if TYPE_CHECKING:
    from tui.app.application import LogitscopeApp


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="logitscope",
        description="Chat with a local language model and see each token's top candidates.",
        epilog="Headless: 'logitscope run --help' and 'logitscope bench --help'. "
               "The conversation library: 'logitscope list', 'export ID --format md|json', 'import FILE'. "
               "A GGUF file as an MLX folder: 'logitscope convert FILE.gguf DIR'.",
    )
    parser.add_argument("--model", metavar="SPEC", help="local model folder, Hugging Face repo id, .gguf file "
                        "(or owner/repo/file.gguf), or 'demo'")
    parser.add_argument("--config", metavar="PATH", type=Path, help="config file (default: the XDG one)")
    parser.add_argument("--trust-remote-code", action="store_true", default=None,
                        help="allow model code from the repo (only for repos you trust)")
    parser.add_argument("--server", metavar="URL", type=nonblank, help="an OpenAI-compatible server "
                        "(mlx_lm.server, vLLM, llama.cpp) instead of MLX here; --model then names its model")
    parser.add_argument("--tokenizer", metavar="SPEC", type=nonblank,
                        help="the server's model's tokenizer, for token-id prompts")
    parser.add_argument("--gguf-threads", metavar="N", help="llama.cpp's threads for GGUF files "
                        "(0 = automatic; default: [model] gguf_threads)")
    parser.add_argument("--fake-engine", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--version", action="store_true",
                        help="print the versions and which BLAS MLX would use here (and why), then exit")
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The TUI's flags (the bench's start-up probe builds its app from them too)."""
    return _parser().parse_args(list(argv))


def _use_fake(args: argparse.Namespace) -> bool:
    return bool(args.fake_engine) or os.environ.get("LOGITSCOPE_FAKE_ENGINE", "") not in ("", "0")


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
    try:
        args = _parser().parse_args(argv)
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
    from tui.app.application import tune_gc_for_streaming

    tune_gc_for_streaming()
    app.run()
    return after_exit(app)


def build_app(args: argparse.Namespace, refuse: "Callable[[str], None] | None" = None) -> "LogitscopeApp | int":
    """The app for `args`, or the exit status of a bad flag (said in one line, through `refuse`).

    The engine's thread is not started here: the app starts the load after its first paint.
    Started at once (tried for #30.8), its MLX and mlx-lm import shared the interpreter lock with
    Textual's import and layout and, on a busy 2-core machine, made both later: first paint
    4.3-9.8 s -> 12.9-19.6 s, ready 18-22 s -> 20-30 s in alternating rounds."""
    from engine.core.settings import load_config, parse_gguf_threads

    say = refuse or (lambda line: print(f"logitscope: {line}", file=sys.stderr))
    try:
        threads = None if args.gguf_threads is None else parse_gguf_threads(args.gguf_threads)
    except ValueError as error:
        say(str(error))
        return 2
    loaded = load_config(args.config, explicit=args.config is not None)
    from engine.core.api import EngineError
    from engine.factory import EngineChoice, build_engine

    choice = EngineChoice(server=args.server or None, tokenizer=args.tokenizer, gguf_threads=threads,
                          scripted=_use_fake(args),
                          scripted_delay_s=float(os.environ.get("LOGITSCOPE_FAKE_DELAY", "0.02")))
    try:
        engine = build_engine(loaded.config, choice)
    except EngineError as error:
        say(str(error))
        return 2
    from tui.app.application import LogitscopeApp

    return LogitscopeApp(engine, loaded, model=args.model, trust_remote_code=args.trust_remote_code)


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
