"""``logitscope score FILE|-``: how a model reads a text, token by token, and its perplexity.

The text (a file, or stdin with ``-``) is tokenized as the model's tokenizer does with its special
tokens (a BOS where the model adds one; on a GGUF file as llama.cpp's perplexity tool tokenizes)
and read in one window of the context (``--ctx`` caps it); every token after the first gets the
statistics a generated token has, teacher-forced (`engine.core.api`, `EngineAPI.score`). Output:
one JSON line per token, then one ``{"type": "perplexity", ...}`` line. The perplexity is
``exp(-mean logprob)`` over those tokens: on a GGUF file, exactly what llama.cpp's logits give
for the same ids and context size (tests/test_gguf_scoring.py computes it with llama-cpp-python's
low-level API; llama-perplexity's own method differs on purpose: it cuts the text into n_ctx
chunks and scores only the second half of each).

The local engine always reads (a remote server sends no prompt logprobs). Every bad input (no
such file, a folder, a binary file, an empty text, a text too long for the context, a model that
is not one) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO

from engine.core import strictjson
from engine.core.api import (
    MAX_SCORE_CANDIDATES,
    ContextLimitError,
    EngineAPI,
    EngineError,
    ModelLoadError,
    Scored,
    ScoreRequest,
    TokenEvent,
)
from engine.core.settings import Config, load_config, printable_json
from tui.cli_parser import OneLineParser, UsageError
from tui.headless.output import progress_printer, say

MAX_BYTES = 64 * 2**20  # a text larger than this is surely not meant (and would not fit a context)
EXIT_USAGE, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 2, 130, 141


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="logitscope score", description=(
        "Read a text with a model and print, as JSON lines, every token's probability, rank, entropy and "
        "top candidates (teacher-forced), then the text's perplexity."))
    parser.add_argument("file", metavar="FILE", help="a UTF-8 text file, or - for stdin")
    parser.add_argument("--model", help="a model folder, a Hugging Face repo id, a .gguf file, or \"demo\" "
                        "(default: from config)")
    parser.add_argument("--candidates", type=int, default=5, metavar="N",
                        help=f"top candidates listed per token (0 to {MAX_SCORE_CANDIDATES}; default 5)")
    parser.add_argument("--ctx", type=int, metavar="N", help="the context size to read the text in "
                        "(default: the model's, or [model] max_context)")
    parser.add_argument("--gguf-threads", type=int, metavar="N", help="llama.cpp's threads for a .gguf model (0 = automatic)")
    parser.add_argument("--trust-remote-code", action="store_true", help="allow Python code shipped with the model")
    parser.add_argument("--config", help="a config file instead of ~/.config/logitscope/config.toml")
    parser.add_argument("--no-config", action="store_true", help="ignore your config file: built-in defaults")
    return parser


@dataclass(frozen=True)
class ScorePlan:
    """Everything `score` needs, checked before any engine starts."""

    text: str
    source: str  # the file's name as the user gave it ("-" for stdin)
    model: str
    candidates: int
    config: Config
    trust_remote_code: bool


def plan_score(args: argparse.Namespace, stdin: Any = None) -> ScorePlan:
    """Merge the config with the flags and read the text; raises UsageError with one line."""
    if args.config and args.no_config:
        raise UsageError("--config and --no-config: choose one")
    if args.config and not Path(args.config).expanduser().is_file():
        raise UsageError(f"config file not found: {args.config}")
    if not 0 <= args.candidates <= MAX_SCORE_CANDIDATES:
        raise UsageError(f"--candidates must be 0 to {MAX_SCORE_CANDIDATES}, got {args.candidates}")
    if args.ctx is not None and not 2 <= args.ctx <= 10_000_000:
        raise UsageError(f"--ctx must be 2 to 10000000 tokens, got {args.ctx}")
    if args.gguf_threads is not None and not 0 <= args.gguf_threads <= 1024:
        raise UsageError(f"--gguf-threads must be 0 to 1024, got {args.gguf_threads}")
    loaded = load_config(Path(args.config).expanduser() if args.config else None, explicit=bool(args.config),
                         user_file=not args.no_config)
    config = loaded.config
    model = config.model
    if args.ctx is not None:
        model = replace(model, max_context=args.ctx)
    if args.gguf_threads is not None:
        model = replace(model, gguf_threads=args.gguf_threads)
    config = replace(config, model=model)
    text = read_text(args.file, stdin if stdin is not None else sys.stdin)
    return ScorePlan(text, args.file, args.model if args.model is not None else config.model.default,
                     args.candidates, config, args.trust_remote_code or config.model.trust_remote_code)


def read_text(name: str, stdin: Any) -> str:
    """The whole text of file `name` (or stdin for ``-``), UTF-8; one UsageError line for a file
    that is missing, a folder, unreadable, binary, not UTF-8, too large or empty."""
    label = "stdin" if name == "-" else name
    try:
        if name == "-":
            buffer = getattr(stdin, "buffer", None)
            raw = buffer.read(MAX_BYTES + 1) if buffer is not None else stdin.read(MAX_BYTES + 1).encode("utf-8")
        else:
            path = Path(name).expanduser()
            if path.is_dir():
                raise UsageError(f"{name} is a folder, not a text file")
            if not path.exists():
                raise UsageError(f"no such file: {name}")
            with path.open("rb") as handle:
                raw = handle.read(MAX_BYTES + 1)
    except OSError as error:
        raise UsageError(f"cannot read {label}: {error.strerror or error}") from None
    if len(raw) > MAX_BYTES:
        raise UsageError(f"{label} is larger than {MAX_BYTES // 2**20} MiB: score a part of it")
    if b"\0" in raw:
        raise UsageError(f"{label} is not a text file (it holds NUL bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{label} is not UTF-8 text") from None
    if not text:
        raise UsageError(f"{label} is empty: there is nothing to score")
    return text


def token_line(token: TokenEvent) -> dict[str, Any]:
    """One scored token as its JSON line (no NaN or infinity: an impossible token is null)."""
    return {
        "type": "token", "index": token.index, "id": token.id, "text": token.text, "piece": token.piece,
        "logprob": _number(token.logprob), "rank": token.rank, "entropy": _number(token.entropy),
        "candidates": [{"id": c.id, "text": c.text, "logprob": _number(c.logprob)} for c in token.candidates],
    }


def perplexity_line(scored: Scored, model: str, context: int) -> dict[str, Any]:
    """The closing line: the perplexity and what it was computed over."""
    nll = -math.fsum(t.logprob for t in scored.tokens) / len(scored.tokens) if scored.tokens else None
    return {"type": "perplexity", "perplexity": _number(scored.perplexity), "mean_nll": _number(nll),
            "tokens": len(scored.ids), "scored": len(scored.tokens), "context": context, "model": model,
            "seconds": scored.seconds}


def _number(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _write(out: TextIO, record: dict[str, Any]) -> None:
    out.write(printable_json(strictjson.dumps(record, ensure_ascii=False)) + "\n")


async def score_text(plan: ScorePlan, engine: EngineAPI, out: TextIO, err: TextIO) -> int:
    """Load, score, print; the engine is closed however it ends."""
    try:
        info = await engine.load(plan.model, trust_remote_code=plan.trust_remote_code, on_progress=progress_printer(err))
        if err.isatty():
            err.write("\r\033[K")
        if not info.abilities.scoring:
            raise EngineError(info.abilities.reason("scoring") or f"{info.name} cannot score a text.")
        scored = await engine.score(ScoreRequest(text=plan.text, candidates=plan.candidates))
        if not scored.tokens:
            raise UsageError(f"{'stdin' if plan.source == '-' else plan.source} is one token long: "
                             "nothing after it to score")
        for token in scored.tokens:
            _write(out, token_line(token))
        _write(out, perplexity_line(scored, info.name, info.context_limit))
        out.flush()
        return 0
    finally:
        await engine.close()


def main(argv: Sequence[str], engine_factory: Callable[[Config], EngineAPI] | None = None) -> int:
    """``logitscope score ...`` (argv starts with "score"); returns the exit status."""
    out, err = sys.stdout, sys.stderr
    try:
        plan = plan_score(build_parser().parse_args(list(argv)[1:]))
    except UsageError as error:
        say(err, str(error))
        return EXIT_USAGE
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else 0
    factory = engine_factory or _local_engine
    try:
        return asyncio.run(score_text(plan, factory(plan.config), out, err))
    except KeyboardInterrupt:
        say(err, "interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        from tui.headless.run import _quiet_broken_pipe

        return _quiet_broken_pipe()
    except (UsageError, ModelLoadError, ContextLimitError) as error:
        say(err, str(error))
        return EXIT_USAGE
    except EngineError as error:
        say(err, str(error))
        return 1


def _local_engine(config: Config) -> EngineAPI:
    """The local engine (MLX folders and GGUF files): a remote server cannot score a text."""
    from engine.factory import local_engine

    return local_engine(config.model)
