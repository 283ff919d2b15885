"""GGUF through llama.cpp: our engine (10 candidates and every statistic per token) against
llama.cpp's own greedy decode through the same binding, on the same file with the same threads.

The files are made here, offline: the bench's random-weight Llama shape is written in float32
(``engine.bench.shapes``), converted to an F32 GGUF (``engine.gguf.convert``) and quantized to
Q4_0, Q8_0 and F16 by llama.cpp's own quantizer (``llama_model_quantize``). The contenders:

- **ours**: a local engine's turn, greedy, 10 candidates: decode speed and prefill speed as
  `TurnFinished` reports them (the same numbers the status bar shows);
- **llama.cpp**: the bare loop, ``llama_decode`` then llama.cpp's greedy sampler
  (``llama_sampler_sample``) per token, on a fresh context; prefill is one ``llama_decode`` of
  the same prompt ids.

Each round runs ours then llama.cpp, so every ratio compares two runs side by side. Thread-count
rows (llama.cpp's bare decode, and ours, at 1 and at 2 threads) back the default of
`engine.gguf.default_threads`. Needs the ``[gguf]`` extra; without it the section says so.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from engine.core.api import GenerateRequest, Message, SamplingParams, TurnFinished
from engine.bench.report import Section, alternate

TYPES = {"F16": 1, "Q8_0": 7, "Q4_0": 2}  # llama_ftype
WORDS = "the quick brown fox jumps over a lazy dog while seven small birds sing".split()


def gguf_files(shape_name: str, scratch: Path) -> dict[str, Path]:
    """The shape as F32 GGUF, then quantized by llama.cpp to each of `TYPES`."""
    import llama_cpp

    from engine.bench.folders import write_model_folder
    from engine.bench.shapes import build_model, shape_named
    from engine.gguf.convert import convert_folder
    from engine.gguf.logs import quiet_logs

    quiet_logs(llama_cpp)
    shape = replace(shape_named(shape_name).with_bits(None), dtype="float32")
    folder = write_model_folder(scratch / f"gguf-{shape.name}", shape, build_model(shape))
    files = {"F32": convert_folder(folder, scratch / f"{shape.name}-F32.gguf")}
    for name, ftype in TYPES.items():
        out = scratch / f"{shape.name}-{name}.gguf"
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = ftype
        params.nthread = 2
        if llama_cpp.llama_model_quantize(str(files["F32"]).encode(), str(out).encode(), ctypes.byref(params)) != 0:
            raise RuntimeError(f"llama.cpp could not quantize {shape.name} to {name}")
        files[name] = out
    return files


def _prompt(round_: int, words: int) -> tuple[Message, ...]:
    """A user message of `words` words that starts differently each round (a cold prefill)."""
    text = " ".join(WORDS[(round_ + i) % len(WORDS)] for i in range(words))
    return (Message("user", f"{round_}: {text}"),)


async def _turn(engine: Any, round_: int, prompt_words: int, tokens: int) -> TurnFinished:
    """One greedy turn with 10 candidates on a prompt that starts differently each round."""
    params = SamplingParams(temperature=0.0, max_tokens=tokens, candidates=10)
    finished = None
    async for item in engine.generate(GenerateRequest(_prompt(round_, prompt_words), params)):
        if isinstance(item, TurnFinished):
            finished = item
    assert finished is not None
    return finished


def _llama_cpp(path: Path, threads: int, prompt_ids: list[int], tokens: int) -> tuple[float, float]:
    """(prefill tok/s, greedy decode tok/s) of llama.cpp's bare loop through the binding."""
    import llama_cpp

    from engine.gguf.model import LlamaModel

    model = LlamaModel(path, 4096, threads)
    sampler = llama_cpp.llama_sampler_init_greedy()
    try:
        model.make_cache()
        start = time.perf_counter()
        for at in range(0, len(prompt_ids), model.batch):  # llama.cpp takes n_batch tokens a call
            model.decode(prompt_ids[at:at + model.batch])
        token = llama_cpp.llama_sampler_sample(sampler, model._ctx, -1)
        prefill = len(prompt_ids) / (time.perf_counter() - start)
        start = time.perf_counter()
        for _ in range(tokens - 1):
            model.decode([token])
            token = llama_cpp.llama_sampler_sample(sampler, model._ctx, -1)
        return prefill, (tokens - 1) / (time.perf_counter() - start)
    finally:
        llama_cpp.llama_sampler_free(sampler)
        model.close()


KINDS = ("F32", "F16", "Q8_0", "Q4_0")


async def gguf_section(section: Section, shapes: tuple[str, ...], scratch: Path, rounds: int, tokens: int,
                       prompt_words: int, threads: tuple[int, ...]) -> None:
    """Rows and ratios for every Llama or Qwen2 shape in `shapes` (its 4-bit or bf16 suffix ignored:
    the GGUF files are made from float32), every file type, at each thread count in `threads`
    (both contenders at the same count), with the load average before each round."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("gguf") is None:
        section.skipped = "needs the [gguf] extra: in logitscope's folder, python3 -m pip install \".[gguf]\""
        return
    for shape in dict.fromkeys(s.split("-")[0] for s in shapes if s.split("-")[0] in ("2m", "30m", "qwen0.5b")):
        files = gguf_files(shape, scratch)
        for kind in KINDS:
            for count in threads:
                await _compare(section, f"{shape} {kind}", files[kind], count, rounds, tokens, prompt_words)
        _threads_row(section, f"{shape} Q4_0", files["Q4_0"], rounds, tokens)
        await _ours_threads_row(section, f"{shape} Q4_0", files["Q4_0"], rounds, tokens, prompt_words)


async def _compare(section: Section, tag: str, path: Path, threads: int, rounds: int, tokens: int,
                   prompt_words: int) -> None:
    """Ours vs llama.cpp on one file, decode and prefill, side by side each round (the machine's
    load drifts), and which goes first alternates: the second of a pair measured up to ~7% faster
    prefill (30M F16: 0.93x with ours always first, 0.99x with theirs first). llama.cpp's prompt
    is ours of the round (or, going first, of the round before: another text of the same length)."""
    from engine.factory import local_engine

    engine = local_engine(threads=threads)
    turns: list[TurnFinished] = []
    theirs: list[tuple[float, float]] = []
    loads: list[float] = []
    try:
        await engine.load(str(path))
        warm = await _turn(engine, 0, prompt_words, tokens)
        for round_ in range(1, rounds + 1):
            loads.append(os.getloadavg()[0])
            if round_ % 2 == 0:  # llama.cpp first
                theirs.append(_llama_cpp(path, threads, list(turns[-1].prompt_ids if turns else warm.prompt_ids),
                                         max(2, tokens)))
            turn = await _turn(engine, round_, prompt_words, tokens)
            turns.append(turn)
            if round_ % 2 == 1:
                theirs.append(_llama_cpp(path, threads, list(turn.prompt_ids), max(2, turn.generated_tokens)))
    finally:
        await engine.close()
    tag = f"{tag}, {threads} thr"
    section.add(f"load average before each round ({tag})", loads, "")
    ours_decode = [t.decode_tps for t in turns]
    ours_prefill = [t.prefill_tps for t in turns]
    section.add(f"ours decode, 10 candidates ({tag})", ours_decode, "tok/s")
    section.add(f"llama.cpp greedy decode ({tag})", [d for _, d in theirs], "tok/s")
    section.compare(f"ours / llama.cpp decode ({tag})", ours_decode, [d for _, d in theirs], 0.95)
    prompt = len(turns[0].prompt_ids)
    section.add(f"ours prefill, {prompt} tokens ({tag})", ours_prefill, "tok/s")
    section.add(f"llama.cpp prefill, {prompt} tokens ({tag})", [p for p, _ in theirs], "tok/s")
    section.compare(f"ours / llama.cpp prefill ({tag})", ours_prefill, [p for p, _ in theirs], 0.95)


async def _ours_threads_row(section: Section, tag: str, path: Path, rounds: int, tokens: int,
                            prompt_words: int) -> None:
    """Our decode at 1 and 2 llama.cpp threads, alternating: what `default_threads` should be
    (ours also runs the statistics thread and the caller's, unlike llama.cpp's bare loop)."""
    from engine.factory import local_engine

    engines = {n: local_engine(threads=n) for n in (1, 2)}
    samples: dict[int, list[float]] = {1: [], 2: []}
    try:
        for engine in engines.values():
            await engine.load(str(path))
            await _turn(engine, 0, prompt_words, tokens)
        for round_ in range(1, rounds + 1):
            for n, engine in engines.items():
                samples[n].append((await _turn(engine, round_, prompt_words, tokens)).decode_tps)
    finally:
        for engine in engines.values():
            await engine.close()
    section.add(f"ours decode, 1 thread ({tag})", samples[1], "tok/s")
    section.add(f"ours decode, 2 threads ({tag})", samples[2], "tok/s")
    section.compare(f"ours, 2 threads / 1 thread ({tag})", samples[2], samples[1])


def _threads_row(section: Section, tag: str, path: Path, rounds: int, tokens: int) -> None:
    """llama.cpp's own decode at 1 and 2 threads: what `default_threads` should be here."""
    ids = list(range(10, 45))
    def decode_at(threads: int) -> Callable[[int], float]:
        return lambda _round: _llama_cpp(path, threads, ids, tokens)[1]

    samples = alternate({str(n): decode_at(n) for n in (1, 2)}, rounds)
    section.add(f"llama.cpp decode, 1 thread ({tag})", samples["1"], "tok/s")
    section.add(f"llama.cpp decode, 2 threads ({tag})", samples["2"], "tok/s")
    section.compare(f"2 threads / 1 thread ({tag})", samples["2"], samples["1"])

