"""The headless mode: ``logitscope run`` talks to a model without the TUI and prints what it says.

Each ``--prompt`` is one user turn of a single conversation, run in order on one engine, so the
KV cache is reused between turns exactly as in the app. Plain output streams the replies; with
``--json`` every token (with its candidates) and every finished turn is one JSON object per line,
for scripts and for checking the numbers the TUI shows.

Everything a user can get wrong (a flag, a value out of range, a model that is not one) ends with
one line on stderr and exit status 2; Ctrl-C cancels the reply, closes the engine and exits 130;
a closed pipe (``| head``) ends quietly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence, TextIO

from engine.core import strictjson
from engine.core.api import (
    ContextLimitError,
    EngineAPI,
    EngineError,
    GenerateRequest,
    Message,
    ModelInfo,
    ModelLoadError,
    ParamError,
    SamplingParams,
    ScoreRequest,
    TurnFinished,
)
from engine.core.chat.context import fit_turn, left_out_note
from engine.core.settings import Config, load_config, parse_gguf_threads, printable
from tui.cli_parser import OneLineParser, UsageError, nonblank
from engine.core.thinking import holds_thinking
from tui.headless.output import Printer, progress_printer, say as _say
from tui.headless.bias import resolve_text_biases
from tui.headless.params import add_param_flags, params_from_args, text_biases
from tui.headless.previews import PreviewSpec, parse_preview, run_turn_with_previews
from tui.headless.saved import LinearChat, first_messages, open_chat, saved_record
from engine.core.library import LibraryError

EngineFactory = Callable[[], EngineAPI]
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process SIGTERM ended
EXIT_BROKEN_PIPE = 141


RUN_DESCRIPTION = (
    "Run prompts as the turns of one conversation and print the replies. Settings come from your "
    "config file, ~/.config/logitscope/config.toml (or --config): the [sampling] parameters the app "
    "saves there with Ctrl+S apply here too, and each flag below overrides one of them. --no-config "
    "ignores the file."
)


def build_parser() -> argparse.ArgumentParser:
    """``logitscope run ...`` (``bench`` has its own parser in tui.bench)."""
    parser = OneLineParser(prog="logitscope", description="Chat with a local model and see its token probabilities.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{run,bench}")
    run = commands.add_parser("run", help="run prompts headless and print the replies (or JSON lines)",
                              description=RUN_DESCRIPTION)
    run.add_argument("--model", help='a model folder, a Hugging Face repo id, a .gguf file (or owner/repo/file.gguf), '
                     'or "demo" (default: from config)')
    run.add_argument("--system", help="a system message before the first prompt")
    run.add_argument("--prompt", action="append", required=True,
                     help="one user turn; repeat for more turns; - reads it from stdin")
    add_param_flags(run)
    run.add_argument("--json", action="store_true", help="print one JSON object per token and per turn")
    run.add_argument("--preview", type=parse_preview, metavar="K:N",
                     help="with --json: each token's line lists where its top K candidates lead, N tokens each "
                     "(the [preview] settings: greedy, or the turn's parameters with a fixed seed)")
    run.add_argument("--trust-remote-code", action="store_true", help="allow Python code shipped with the model")
    run.add_argument("--gguf-threads", type=_threads, metavar="N",
                     help="llama.cpp's threads for a .gguf model (0 = automatic; default: [model] gguf_threads)")
    run.add_argument("--config", help="a config file to use instead of ~/.config/logitscope/config.toml")
    run.add_argument("--no-config", action="store_true",
                     help="ignore your config file (and the settings the app saved there): built-in defaults")
    run.add_argument("--server", type=nonblank, help="an OpenAI-compatible server URL (mlx_lm.server, vLLM, "
                     "llama.cpp); --model then names its model")
    run.add_argument("--tokenizer", type=nonblank,
                     help="the server's model's tokenizer (folder or repo id), for token-id prompts")
    run.add_argument("--turn-timeout", type=float, metavar="S",
                     help="the longest a reply from a server may take in all (default: [engine] turn_timeout_s)")
    run.add_argument("--thinking", choices=("on", "off"), help="a reasoning model's thinking switch, where its chat "
                     "template has one (Qwen3's enable_thinking); default: the template's")
    run.add_argument("--score", action="store_true", help="after the last reply, read the whole chat back and "
                     "print its perplexity and each message's (teacher-forced; a JSON line with --json)")
    run.add_argument("--save", action="store_true", help="keep the conversation in the library and say its id")
    run.add_argument("--continue", dest="continue_id", metavar="ID", help="continue a chat from the library "
                     "(its replies as their exact token ids when the model is the same); new turns are saved to it")
    return parser


def _threads(text: str) -> int:
    """--gguf-threads, checked where the config key is (one line through `OneLineParser.error`)."""
    try:
        return parse_gguf_threads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--gguf-threads ")) from None


@dataclass(frozen=True)
class RunPlan:
    """Everything `run` needs, checked before any engine starts."""

    model: str
    trust_remote_code: bool
    system: str | None
    prompts: tuple[str, ...]
    params: SamplingParams
    json: bool
    config: Config
    preview: PreviewSpec | None = None
    save: bool = False  # keep the chat in the library (--save, or --continue)
    continue_id: str | None = None
    thinking: bool | None = None  # --thinking on/off; None: the template's default
    score: bool = False  # --score: the chat's perplexities after the last reply
    text_biases: tuple[tuple[str, float], ...] = ()  # --logit-bias TEXT=BIAS, resolved once the model is in


def plan_run(args: argparse.Namespace) -> RunPlan:
    """Merge config defaults with flags; raises UsageError/ParamError with one line."""
    if args.config and args.no_config:
        raise UsageError("--config and --no-config: choose one")
    if args.config and not Path(args.config).expanduser().is_file():
        raise UsageError(f"config file not found: {args.config}")
    loaded = load_config(Path(args.config).expanduser() if args.config else None, explicit=bool(args.config),
                         user_file=not args.no_config)
    for problem in loaded.problems:
        _say(sys.stderr, f"warning: {problem}")
    config = loaded.config
    if args.turn_timeout is not None and not 1.0 <= args.turn_timeout <= 86400.0:
        raise UsageError(f"--turn-timeout must be 1 to 86400 seconds, got {args.turn_timeout:g}")
    if args.server is not None or args.tokenizer is not None or args.turn_timeout is not None:
        config = replace(config, engine=replace(config.engine, server=args.server or config.engine.server,
                                                tokenizer=args.tokenizer or config.engine.tokenizer,
                                                turn_timeout_s=args.turn_timeout or config.engine.turn_timeout_s))
    if args.gguf_threads is not None:
        config = replace(config, model=replace(config.model, gguf_threads=args.gguf_threads))
    if args.preview is not None and not args.json:
        raise UsageError("--preview needs --json: the previews are part of each token's JSON line")
    if args.continue_id is not None and args.system is not None:
        raise UsageError("--continue keeps the chat's own system message: drop --system")
    prompts = _with_stdin(args.prompt)
    if any(not p.strip() for p in prompts):
        raise UsageError("--prompt must not be empty")
    for flag, texts in (("--prompt", prompts), ("--system", [args.system or ""])):
        if not all(_is_utf8(text) for text in texts):
            raise UsageError(f"{flag} is not valid UTF-8 text")
    return RunPlan(
        model=args.model if args.model is not None else config.model.default,
        trust_remote_code=args.trust_remote_code or config.model.trust_remote_code,
        system=args.system,
        prompts=tuple(prompts),
        params=params_from_args(args, config.sampling),
        json=args.json,
        config=config,
        preview=args.preview,
        save=args.save or args.continue_id is not None,
        continue_id=args.continue_id,
        thinking=None if args.thinking is None else args.thinking == "on",
        score=args.score,
        text_biases=text_biases(args),
    )


def _with_stdin(prompts: list[str]) -> list[str]:
    """The prompts with ``-`` replaced by what stdin holds (one final newline dropped: ``echo``'s)."""
    if prompts.count("-") > 1:
        raise UsageError("--prompt -: stdin can be read only once")
    return [read_stdin() if prompt == "-" else prompt for prompt in prompts]


def read_stdin() -> str:
    """All of stdin as UTF-8 text, or a UsageError saying why not."""
    try:
        buffer = getattr(sys.stdin, "buffer", None)
        text = buffer.read().decode("utf-8") if buffer is not None else sys.stdin.read()
    except UnicodeDecodeError:
        raise UsageError("--prompt -: stdin is not valid UTF-8 text") from None
    except (OSError, ValueError) as error:
        raise UsageError(f"--prompt -: cannot read stdin ({error})") from None
    text = text[:-1] if text.endswith("\n") else text
    return text[:-1] if text.endswith("\r") else text


def _real_engine(config: Config) -> EngineAPI:
    """The engine the settings name (`engine.factory`, as the app builds it): the remote one when
    [engine] server / --server names a server, else the local one (MLX folders and GGUF files)."""
    from engine.factory import build_engine

    return build_engine(config)


# ---------------------------------------------------------------------------------------------
# Running


async def _run_turn(engine: EngineAPI, request: GenerateRequest, turn: int, printer: Printer) -> TurnFinished:
    """Stream one turn to the printer; returns its TurnFinished.

    The stream is closed however reading ends, so a failed print (a closed pipe) stops the turn on
    the engine now rather than when the generator is garbage collected.
    """
    async with contextlib.aclosing(engine.generate(request)) as events:
        async for event in events:
            if isinstance(event, TurnFinished):
                printer.finished(turn, event, request.params)
                return event
            printer.token(turn, event)
    raise EngineError("the engine ended a turn without finishing it")


def with_seed(params: SamplingParams) -> SamplingParams:
    """`params` with a seed: a fresh one chosen here when none is set, as the engine would choose
    it, so the turn's JSON line can say which seed it ran with."""
    if params.seed is not None:
        return params
    return params.with_changes(seed=int.from_bytes(os.urandom(8), "little") >> 1)


async def run_conversation(
    plan: RunPlan, engine: EngineAPI, printer: Printer, err: TextIO, on_loaded: Callable[[], None] | None = None,
    chat: LinearChat | None = None,
) -> None:
    """Load the model, then run every prompt as the next turn of one conversation (kept in the
    library's `chat` after each reply, when given)."""
    in_turn = False
    folder: str | None = None
    said: set[str] = set()  # library problems already warned about (each once)
    try:
        info = await engine.load(plan.model, trust_remote_code=plan.trust_remote_code,
                                 on_progress=progress_printer(err))
        if err.isatty():
            err.write("\r\033[K")
        printer.recommended = dict(info.recommended)
        for note in info.notes:  # e.g. an assumed context limit: said once, before the first reply
            err.write(f"logitscope: note: {printable(note)}\n")
        if not info.has_chat_template:
            err.write(f"logitscope: note: {printable(info.name)} has no chat template: plain text "
                      f"(each message after the first starts after a blank line)\n")
        if on_loaded is not None:
            on_loaded()
        folder = info.path
        params = await resolve_text_biases(engine, plan.params, plan.text_biases)
        messages = first_messages(plan.system, chat, info.path)
        dropped = 0
        for turn, prompt in enumerate(plan.prompts, 1):
            messages.append(Message("user", prompt))
            fitted = await fit_turn(engine, messages, plan.config.chat.context_strategy, params.max_tokens,
                                    thinking=plan.thinking, dropped_before=dropped)
            if fitted.refusal is not None:  # before the prompt enters the library: nothing to undo
                raise ContextLimitError(fitted.refusal)
            if fitted.dropped != dropped and fitted.dropped:
                _say(err, f"note: {left_out_note(fitted.dropped)}")
            dropped = fitted.dropped
            if chat is not None:  # the turn is kept from its start, the reply as it grows (`LinearChat`)
                _warn_once(err, chat.user(prompt), said)
            printer.started(turn, prompt)
            in_turn = True
            request = GenerateRequest(fitted.messages, with_seed(params), thinking=plan.thinking)
            if plan.preview is None:
                done = await _run_turn(engine, request, turn, printer)
            else:
                done = await run_turn_with_previews(engine, request, turn, printer, plan.preview, plan.config.preview)
            in_turn = False
            messages.append(_reply(done, plan.thinking, info.drops_past_thinking))
            if chat is not None:
                _warn_once(err, chat.reply(done, request.params, info.path) or chat.problem, said)
        if plan.score:
            await _score_chat(engine, info, messages, plan.thinking, printer)
    except BaseException as stopped:  # a signal (CancelledError), a failure: keep the reply so far
        if chat is not None and in_turn:
            chat.cut("error" if isinstance(stopped, Exception) else "cancelled", folder)
        raise
    finally:
        if in_turn:
            engine.cancel()
        await engine.close()


async def _score_chat(engine: EngineAPI, info: ModelInfo, messages: list[Message], thinking: bool | None,
                      printer: Printer) -> None:
    """--score: the whole chat read back, teacher-forced (`EngineAPI.score`), its perplexities printed."""
    if not info.abilities.scoring:
        raise EngineError(info.abilities.reason("scoring") or f"{info.name} cannot score the chat (--score).")
    continued = bool(messages) and messages[-1].role == "assistant"
    scored = await engine.score(ScoreRequest(tuple(messages), candidates=0, continue_last=continued, thinking=thinking))
    printer.scored(scored, messages)


def _reply(done: TurnFinished, thinking: bool | None, drop_thinking: bool) -> Message:
    """The reply as the next turn's history: its exact ids, or as text where the template drops
    earlier replies' thinking and it thought (the TUI's default: `Conversation.messages`)."""
    ids = None if drop_thinking and holds_thinking(done.text) else done.token_ids
    return Message("assistant", done.text, ids, thinking)


async def _main_async(plan: RunPlan, factory: EngineFactory, out: TextIO, err: TextIO, remember: bool) -> int:
    """Run the plan; with `remember`, a model that loaded goes into the picker's recent list;
    with `save`, the chat goes into the library and its id is said last."""
    from engine.models import record_recent

    chat = None
    if plan.save:
        try:
            chat = open_chat(plan.continue_id, plan.model)
        except LibraryError as error:
            return _fail(err, str(error))
    engine = factory()
    on_loaded = (lambda: record_recent(plan.model)) if remember else None
    printer = Printer(out, plan.json, err, len(plan.prompts))
    printer.on_token = chat.token if chat is not None else None
    terminated = _on_sigterm_cancel()
    try:
        await run_conversation(plan, engine, printer, err, on_loaded, chat)
    except asyncio.CancelledError:  # Ctrl+C (asyncio cancels this task) or SIGTERM: the chat is kept
        if chat is not None and chat.conversation_id is not None:
            _say(err, f"the chat so far is saved as {chat.conversation_id}")
        if terminated.is_set():
            return _fail(err, "terminated", EXIT_TERMINATED)
        raise
    if chat is not None and chat.branched:
        _say(err, f"note: chat {chat.conversation_id} was changed by another logitscope meanwhile; "
                  "this run's turns were added to it as a branch")
    if chat is not None and chat.conversation_id is not None:
        if plan.json:
            out.write(strictjson.dumps(saved_record(chat.conversation_id)) + "\n")
            out.flush()
        else:
            _say(err, f"saved as {chat.conversation_id}")
    return 0


def _on_sigterm_cancel() -> asyncio.Event:
    """SIGTERM cancels the running task, as Ctrl+C does, so the reply so far is saved and the exit
    status says so (143); the returned event is set when it came. Where the loop cannot take
    signal handlers (not the main thread), SIGTERM keeps its default."""
    came = asyncio.Event()
    task = asyncio.current_task()

    def terminate() -> None:
        came.set()
        if task is not None:
            task.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminate)
    return came


def _warn_once(err: TextIO, problem: str | None, said: set[str]) -> None:
    """A library refusal (locked, full, read-only): one line, once, and the run goes on."""
    if problem and problem not in said:
        said.add(problem)
        _say(err, f"warning: {problem}")


def _fail(err: TextIO, message: str, code: int = EXIT_USAGE) -> int:
    """Print the one-line reason and return the exit status (no traceback ever reaches the user)."""
    _say(err, message)
    return code


def _is_utf8(text: str) -> bool:
    """False for text holding undecodable bytes (Python keeps them as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _quiet_broken_pipe() -> int:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush cannot complain."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


def main(argv: Sequence[str] | None = None, engine_factory: EngineFactory | None = None) -> int:
    """``logitscope run ...``: returns the exit status (0 ok, 2 bad input, 130 Ctrl-C)."""
    out, err = sys.stdout, sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        plan = plan_run(args)
    except (UsageError, ParamError) as error:
        return _fail(err, str(error))
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else 0
    factory = engine_factory or (lambda: _real_engine(plan.config))
    try:
        remember = engine_factory is None and not plan.config.engine.server  # a server's model is no folder
        code = asyncio.run(_main_async(plan, factory, out, err, remember=remember))
    except KeyboardInterrupt:
        err.write("\n")  # the reply may have stopped mid-line
        return _fail(err, "interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except (ModelLoadError, ContextLimitError, ParamError) as error:  # ParamError: a --logit-bias text
        return _fail(err, str(error))
    except EngineError as error:
        return _fail(err, str(error), 1)
    return code

