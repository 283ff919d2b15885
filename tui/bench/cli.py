"""``logitscope bench``: argument parsing and the order the sections run in.

Everything runs offline on models built here with random weights at realistic shapes (see
`engine.bench.shapes`), unless ``--model`` names a real one. ``--quick`` is a smoke run (under
about two minutes on a 2-core CPU); the default is a full run (tens of minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from tui.bench.plan import Plan
from tui.cli_parser import OneLineParser, UsageError
from engine.cpu.blas import enable_fast_blas

SECTIONS = ("decode", "ttft", "branch", "preview", "rewind", "sampler", "blas-dtype", "tui", "gguf", "gguf-load", "formats",
            "memory", "library")


def make_plan(args: argparse.Namespace) -> Plan:
    quick = bool(args.quick)
    rounds = args.rounds or (2 if quick else 5)
    return Plan(
        rounds=rounds,
        shapes=tuple(args.shapes.split(",")) if args.shapes else ("2m", "30m") if quick else ("2m", "30m", "30m-4bit"),
        decode_tokens=48 if quick else 200,
        decode_seconds=0.0 if quick else 30.0,
        history_tokens=args.history,
        reply_tokens=24 if quick else 100,
        sampler_vocabs=(32000, 151936),
        sampler_iterations=10 if quick else 40,
        process_shapes=tuple(args.shapes.split(",")) if args.shapes else ("2m-4bit", "2m") if quick
        else ("30m-4bit", "30m"),
        process_prompt=32 if quick else 128,
        process_decode=16 if quick else 48,
        process_budget_s=5.0 if quick else 10.0,
        sections=tuple(args.sections.split(",")) if args.sections else SECTIONS,
        weights_dtype=args.weights_dtype,
        gguf_file=args.gguf or "",
    )


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="logitscope bench", description="Measure logitscope's speed, offline.")
    p.add_argument("--model", metavar="SPEC", help="also benchmark this real model (folder or hub id)")
    p.add_argument("--rounds", type=int, default=0, metavar="N", help="alternating rounds per comparison")
    p.add_argument("--quick", action="store_true", help="a short smoke run (about 2 minutes)")
    p.add_argument("--history", type=int, default=1000, metavar="N",
                   help="tokens of conversation history for the TTFT and branching sections")
    p.add_argument("--weights-dtype", choices=("bfloat16", "float32"), default="bfloat16",
                   help="dtype the built-in models are saved in (hub models ship bfloat16)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--gguf", metavar="FILE", help="the real GGUF file the gguf-load section loads (ours vs llama.cpp)")
    p.add_argument("--shapes", metavar="LIST",
                   help="built-in random-weight models to use, e.g. 2m,30m,30m-4bit,qwen0.5b (4-bit), "
                        "qwen0.5b-bf16 (all sections, the BLAS one included)")
    p.add_argument("--sections", metavar="LIST", help=f"comma-separated subset of: {','.join(SECTIONS)}")
    return p


def _problem(args: argparse.Namespace, plan: Plan) -> str:
    """One line saying what is wrong with the arguments, or ""."""
    from engine.bench.shapes import shape_named

    if args.rounds < 0:
        return f"--rounds must be a positive number, got {args.rounds}"
    if args.history < 100:
        return f"--history must be at least 100 tokens, got {args.history}"
    bad = [name for name in plan.sections if name not in SECTIONS]
    if bad:
        return f"unknown section {bad[0]!r}; choose from {', '.join(SECTIONS)}"
    for name in plan.shapes:
        try:
            shape_named(name)
        except ValueError as error:
            return str(error)
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, run, print; bad input is one line on stderr and exit status 2."""
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser().parse_args(words[1:] if words[:1] == ["bench"] else words)
    except UsageError as error:
        return _refuse(str(error))
    plan = make_plan(args)
    problem = _problem(args, plan)
    if problem:
        return _refuse(problem)
    blas = enable_fast_blas()  # before MLX loads, as the app does
    from tui.bench.run import run_all

    with tempfile.TemporaryDirectory(prefix="logitscope-bench-") as scratch:
        try:
            report = asyncio.run(run_all(plan, blas.reason, Path(scratch), args.model, progress=_progress))
        except Exception as error:  # noqa: BLE001 - one line for the user
            print(f"logitscope bench: {type(error).__name__}: {error}".splitlines()[0], file=sys.stderr)
            return 1
    print(report.to_json() if args.json else report.to_text())
    return 0


def _refuse(problem: str) -> int:
    """A bad command line: one line on stderr, exit status 2."""
    print(f"logitscope bench: {problem}", file=sys.stderr)
    return 2


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
