"""One model's decode speed, weight bytes read per decoded token and resident memory, measured in
a fresh process: ``python -m engine.bench.memory_worker '<json>'`` (keys: shape, prompt, decode,
and folder: the model folder to load; without one the process builds and writes it first).
``{"shape": ..., "write": FOLDER}`` only writes the shape's model folder there;
``{"gguf": FILE, "threads": N}`` measures a GGUF file through llama.cpp instead.

Why a process of its own: peak resident memory (``ru_maxrss``) is per process and never goes
down, so each model needs a clean one; and building the random model (bfloat16, then quantized)
peaks above what the engine itself needs (1.24 GB for the 4-bit Qwen2.5-0.5B shape, which the
engine then holds in ~0.5 GB), so the section writes each folder in a process of its own. The
engine is logitscope's own (every CPU fast path as the app applies it, including the float32
copies of 4-bit layers it chose to keep for decoding).

"Bytes read per decoded token" counts the weights one decode step reads: every linear layer (its
kept float32 copy where decoding uses one, else its packed 4-bit words with their scales and
biases), and the output head (a tied embedding counts as the head; a lookup reads one row only).
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import tempfile
from pathlib import Path
from typing import Any

from engine.bench.report import proc_status_bytes
from engine.cpu.blas import enable_fast_blas


def decode_bytes(model: Any) -> int:
    """Weight bytes one decode step reads (see the module docstring)."""
    import mlx.nn as nn

    tied = bool(getattr(getattr(model, "args", None), "tie_word_embeddings", False))
    total = 0
    for _, layer in model.named_modules():
        if isinstance(layer, (nn.QuantizedEmbedding, nn.Embedding)):
            total += _head_bytes(layer) if tied else 0
        elif isinstance(layer, (nn.QuantizedLinear, nn.Linear)):
            kept = getattr(layer, "kept_for_decode", lambda: None)()
            total += int(kept.nbytes) if kept is not None else _own_bytes(layer)
    return total


def kept_copy_bytes(model: Any) -> int:
    """Bytes of the float32 copies the model's 4-bit layers keep (`engine.cpu.denseplan` chose them)."""
    return sum(int(layer._dense.nbytes) for _, layer in model.named_modules()  # noqa: SLF001 - a probe
               if getattr(layer, "_keep_dense", False) and getattr(layer, "_dense", None) is not None)


def _head_bytes(layer: Any) -> int:
    """A tied embedding used as the output head: its kept float32 copy if it has one, else itself."""
    dense = getattr(layer, "_dense", None)
    return int(dense.nbytes) if dense is not None else _own_bytes(layer)


def _own_bytes(layer: Any) -> int:
    """The layer's own parameters (weight, and scales, biases, bias where it has them)."""
    return sum(int(layer[name].nbytes) for name in ("weight", "scales", "biases", "bias") if name in layer)


async def _measure(config: dict[str, Any]) -> dict[str, Any]:
    from engine.core.api import GenerateRequest, Message
    from engine.bench.turns import engine_turn, params
    from engine.bench.worker import _text_of_tokens
    from engine.local.client import Engine

    with tempfile.TemporaryDirectory() as scratch:
        folder = config.get("folder") or write_folder(config["shape"], Path(scratch))
        size = int(config.get("prompt", 128))
        # the prompts first: loading a tokenizer here while the engine thread measures which
        # float32 copies pay (`engine.cpu.denseplan`, right after the load) skewed that choice
        texts = [_text_of_tokens(folder, size, round_) for round_ in (0, 1)]
        engine = Engine()
        try:
            info = await engine.load(folder)
            await engine_turn(engine, GenerateRequest((Message("user", texts[0]),), params(8, 0)))
            turn = await engine_turn(engine, GenerateRequest((Message("user", texts[1]),),
                                                             params(int(config.get("decode", 64)), 1)))
            session = engine._worker._session if engine._worker is not None else None  # noqa: SLF001 - a probe
            read = decode_bytes(session.model) if session is not None else 0
            kept = kept_copy_bytes(session.model) if session is not None else 0
        finally:
            await engine.close()
    return {"decode_tps": turn.decode_tps, "decode_bytes": read, "kept_bytes": kept,
            "peak_rss_bytes": peak_rss_bytes(), "dtype": info.dtype, "config": config}


async def _measure_gguf(config: dict[str, Any]) -> dict[str, Any]:
    """The same numbers for a GGUF file through llama.cpp (``{"gguf": FILE, "threads": N}``).
    Bytes read per token: the file's size (a decode step reads every weight once, and the
    embedding table is the output head when it is tied, as in the bench's shapes)."""
    from engine.bench.gguf_section import _prompt
    from engine.core.api import GenerateRequest
    from engine.bench.turns import engine_turn, params
    from engine.factory import local_engine

    path = Path(config["gguf"])
    engine = local_engine(threads=int(config.get("threads", 0)))
    try:
        await engine.load(str(path))
        await engine_turn(engine, GenerateRequest(_prompt(0, 20), params(8, 0)))
        turn = await engine_turn(engine, GenerateRequest(_prompt(1, int(config.get("prompt", 128)) // 4),
                                                         params(int(config.get("decode", 64)), 1)))
    finally:
        await engine.close()
    return {"decode_tps": turn.decode_tps, "decode_bytes": path.stat().st_size, "kept_bytes": 0,
            "peak_rss_bytes": peak_rss_bytes(), "dtype": "gguf", "config": config}


def peak_rss_bytes() -> int:
    """This process's own peak resident memory. On Linux ``VmHWM``: ``ru_maxrss`` carries the
    parent's resident size at the fork through the exec (a bench process holding 574 MB made
    every worker report 574 MB); elsewhere ``ru_maxrss`` (bytes on macOS)."""
    own = proc_status_bytes("VmHWM")
    if own is not None:
        return own
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def write_folder(shape_name: str, folder: Path) -> str:
    """Build the shape's random model and write it as a model folder; returns the folder."""
    from engine.bench.folders import write_model_folder
    from engine.bench.shapes import build_model, shape_named

    shape = shape_named(shape_name)
    write_model_folder(folder, shape, build_model(shape))
    return str(folder)


def run(config: dict[str, Any]) -> dict[str, Any]:
    """Load the fast BLAS first (as the app does), then write a folder or measure."""
    enable_fast_blas()
    if config.get("write"):
        return {"folder": write_folder(config["shape"], Path(config["write"]))}
    return asyncio.run(_measure_gguf(config) if config.get("gguf") else _measure(config))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    print(json.dumps(run(json.loads(args[0]))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
