"""``logitscope convert FILE.gguf DIR``: a GGUF model as an MLX model folder (`engine.gguf.to_mlx`).

Why a command: a model a user has only as a GGUF file then also runs on the MLX engine (its CPU
speed layer, its model families), and the folder is an ordinary mlx-lm folder for any other tool.
The weights are dequantized to float32 (``--dtype float16`` halves the folder and rounds them); the
written tokenizer is checked against llama.cpp's own on a probe text before the command succeeds.

Every bad input is one line on stderr and exit status 2; a folder that already holds a model is
never written into, and a folder this command made is removed again when the conversion fails.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Sequence


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="logitscope convert",
        description="Write a GGUF model (llama, qwen2 or gemma3) as an MLX model folder, dequantized, without torch.",
    )
    parser.add_argument("file", type=Path, help="the .gguf file")
    parser.add_argument("folder", type=Path, help="the folder to write (new, or empty)")
    parser.add_argument("--dtype", choices=("float32", "float16"), default="float32",
                        help="the weights' type in the folder (default float32: exactly the file's values)")
    return parser


def main(argv: Sequence[str]) -> int:
    """``logitscope convert ...`` (argv starts with "convert"); returns the exit status."""
    args = _parser().parse_args(list(argv)[1:])
    from engine.core.api import EngineError
    from engine.core.text import printable

    made = not args.folder.exists()
    try:
        if args.folder.exists() and (not args.folder.is_dir() or any(args.folder.iterdir())):
            raise EngineError(f"{printable(str(args.folder))} exists and is not an empty folder; choose a new one")
    except (EngineError, OSError) as error:
        print(f"logitscope convert: {printable(str(error))}", file=sys.stderr)
        return 2
    try:
        from engine.gguf import convert_to_mlx

        convert_to_mlx(str(args.file), args.folder, args.dtype,
                       report=lambda line: print(printable(line), file=sys.stderr))
    except (EngineError, OSError) as error:
        _remove_written(args.folder, made)  # the folder was new or empty: all in it is ours
        print(f"logitscope convert: {printable(str(error))}", file=sys.stderr)
        return 2
    except ImportError:
        _remove_written(args.folder, made)
        print('logitscope convert: needs the [gguf] extra: pip install "logitscope[gguf]"', file=sys.stderr)
        return 2
    print(printable(str(args.folder)))
    return 0

def _remove_written(folder: Path, made: bool) -> None:
    """Take back a failed conversion: the folder if this command made it, else what it wrote
    into the (then empty) folder."""
    if not folder.is_dir():
        return
    if made:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for child in folder.iterdir():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
