"""The TUI built from its command line, apart from the console script (`tui.main`) so that the
bench's start-up probe (`tui.bench.probe_startup`) builds the app exactly as `logitscope` does
without importing the console script, which hands ``bench`` over to the bench."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from tui.cli_parser import OneLineParser, nonblank

if TYPE_CHECKING:
    from engine.process.spawn import Spawned
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


def engine_in_process() -> bool:
    """LOGITSCOPE_ENGINE_PROCESS=0: the engine on a thread of the app's own process (debugging,
    a platform where a second process is unwelcome, the bench's comparison)."""
    return os.environ.get("LOGITSCOPE_ENGINE_PROCESS", "").strip().lower() in ("0", "off", "no", "false")


def build_app(args: argparse.Namespace, refuse: "Callable[[str], None] | None" = None) -> "LogitscopeApp | int":
    """The app for `args`, or the exit status of a bad flag (said in one line, through `refuse`).

    A local engine runs in a process of its own (`engine.process`), started here: its MLX and
    mlx-lm imports run while this process imports Textual and paints (the app asks for the load
    after its first paint). In one process (tried for #30.8) both shared one interpreter lock and,
    on a busy 2-core machine, made each other later. LOGITSCOPE_ENGINE_PROCESS=0 keeps the engine
    on a thread of the app's process (`engine_in_process`).

    That process is started first of all, before the config is read (`engine.process.spawn`):
    its own start then overlaps the app's. Whatever way this returns without an engine that took
    it (a refused flag, a server in the config), it is discarded."""
    spawned = _spawn_early(args)
    try:
        return _build_app(args, refuse, spawned)
    finally:
        if spawned is not None and not spawned.taken:
            spawned.discard()


def _spawn_early(args: argparse.Namespace) -> "Spawned | None":
    """The engine process, when the flags alone say the engine will be a local one in a process."""
    if _use_fake(args) or args.server or engine_in_process():
        return None
    from engine.process.spawn import spawn

    return spawn()


def _build_app(args: argparse.Namespace, refuse: "Callable[[str], None] | None",
               spawned: "Spawned | None") -> "LogitscopeApp | int":
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
                          scripted_delay_s=float(os.environ.get("LOGITSCOPE_FAKE_DELAY", "0.02")),
                          own_process=not engine_in_process(), spawned=spawned, threads_in_use=True)
    try:
        engine = build_engine(loaded.config, choice)
    except EngineError as error:
        say(str(error))
        return 2
    model = args.model or loaded.config.model.default
    trust = loaded.config.model.trust_remote_code if args.trust_remote_code is None else args.trust_remote_code
    preload = getattr(engine, "preload", None)
    if callable(preload):  # the engine process loads while Textual imports (engine.process.preload)
        preload(model, trust_remote_code=trust)
    from tui.app.application import LogitscopeApp

    return LogitscopeApp(engine, loaded, model=model, trust_remote_code=trust)
