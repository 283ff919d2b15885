"""Run the planned sections in order and collect one `Report`.

Models are built and written to a scratch folder first, then each is opened once as a pair of
contenders (the Engine and plain mlx-lm) shared by the decode, TTFT and branching sections.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from engine.cpu import native
from engine.bench.engine_sections import branch_section, decode_section, ttft_section
from engine.bench.machine import describe
from engine.bench.process_section import process_section
from engine.bench.report import Report, Section
from engine.bench.rewind_section import rewind_section
from engine.bench.sampler_section import sampler_section
from tui.bench.tui_section import tui_section
from engine.bench.turns import Contenders, open_contenders

if TYPE_CHECKING:
    from tui.bench.plan import Plan

Progress = Callable[[str], None]


def _folder_for(shape_name: str, scratch: Path, dtype: str) -> str:
    from dataclasses import replace

    from engine.bench.folders import write_model_folder
    from engine.bench.shapes import build_model, shape_named

    shape = replace(shape_named(shape_name), dtype=dtype)
    return str(write_model_folder(scratch / shape.name, shape, build_model(shape)))


async def run_all(plan: "Plan", blas: str, scratch: Path, model: str | None, progress: Progress) -> Report:
    """Every requested section; the header records where and how it ran."""
    sections = {name: Section(name, title) for name, title in (
        ("decode", "Decode speed: Engine (10 candidates/token) vs plain mlx-lm, temp 0.7 top-p 0.9"),
        ("ttft", f"Time to first token with {plan.history_tokens:,} tokens of history"),
        ("branch", "Branching: continue from an alternative mid-reply"),
        ("preview", "What-if previews: 3 candidates x 12 tokens in one batch vs the continuations they stand for"),
        ("rewind", "Regenerate on caches that cannot be trimmed (SSM, hybrid): rebuild vs snapshot"),
        ("sampler", "Sampler cost per token"),
        ("blas-dtype", "Fast BLAS and compute dtype (plain mlx-lm, a fresh process per configuration)"),
        ("tui", "TUI: stream throughput, key latency, start-up"),
        ("gguf", "GGUF through llama.cpp: ours (10 candidates) vs llama.cpp's own greedy loop, same file and threads"),
        ("gguf-load", "Loading a real GGUF file: ours vs llama-cpp-python's Llama(), start to first token, memory"),
        ("memory", "4-bit MLX models on the CPU: decode speed, weights read per token, resident memory vs float32"),
        ("formats", "Which format on a CPU: MLX float32 and 4-bit, GGUF F32/F16/Q8_0/Q4_0: speed, memory, bandwidth bound"),
        ("library", "Conversation library: 1,000 chats x 50 turns, open and filter (target: within 100 ms of a key)"),
    ) if name in plan.sections}
    targets = [(name, None) for name in plan.shapes] + ([(model, model)] if model else [])
    dtype = "n/a"
    for name, spec in targets:
        if not {"decode", "ttft", "branch", "preview"} & sections.keys():
            break
        progress(f"bench: preparing {name}")
        contenders = await open_contenders(spec or _folder_for(name, scratch, plan.weights_dtype))
        dtype = contenders.dtype
        try:
            await _engine_sections(sections, plan, name if spec is None else "model", contenders, progress)
        finally:
            await contenders.engine.close()
    if "rewind" in sections:
        progress("bench: rewind (Mamba-2, hybrid)")
        rewind_section(sections["rewind"], scratch, plan.history_tokens, plan.rounds)
    if "sampler" in sections:
        progress("bench: sampler")
        sampler_section(sections["sampler"], plan.sampler_vocabs, plan.sampler_iterations, plan.rounds)
    if "blas-dtype" in sections:
        progress("bench: BLAS and dtype (subprocesses)")
        for shape in plan.process_shapes:
            process_section(sections["blas-dtype"], shape, plan.process_prompt, plan.process_decode,
                            plan.rounds, plan.process_budget_s)
    if "tui" in sections:
        progress("bench: TUI (subprocesses)")
        app_shape = "30m" if "30m" in plan.shapes else next(iter(plan.shapes), None)
        app_model = (app_shape, _folder_for(app_shape, scratch, plan.weights_dtype)) if app_shape else None
        tui_section(sections["tui"], plan.rounds, 2000 if plan.decode_tokens < 100 else 4000, app_model)
    if "gguf" in sections:
        from engine.bench.gguf_section import gguf_section
        from engine.gguf.threads import candidate_threads

        progress("bench: GGUF (llama.cpp)")
        await gguf_section(sections["gguf"], plan.shapes, scratch, plan.rounds, plan.decode_tokens,
                           plan.process_prompt, candidate_threads())
    if "gguf-load" in sections:
        from engine.bench.gguf_load import gguf_load_section
        from engine.gguf import default_threads

        progress("bench: GGUF load (subprocesses)")
        gguf_load_section(sections["gguf-load"], plan.gguf_file, plan.rounds, default_threads())
    if "memory" in sections:
        from engine.bench.memory_section import memory_section

        progress("bench: 4-bit memory (subprocesses)")
        memory_section(sections["memory"], plan.shapes, plan.process_prompt, plan.decode_tokens, plan.rounds)
    if "formats" in sections:
        from engine.bench.formats_section import formats_section

        progress("bench: formats (subprocesses)")
        formats_section(sections["formats"], plan.shapes, scratch, plan.process_prompt, plan.decode_tokens,
                        plan.rounds)
    if "library" in sections:
        from tui.bench.library_section import library_section

        progress("bench: conversation library (builds 1,000 chats)")
        library_section(sections["library"], scratch, plan.rounds)
        from engine.bench.kvdisk_rows import kvdisk_rows

        shape = plan.shapes[-1]
        progress(f"bench: reopening a long chat ({shape}, KV cache on disk)")
        await kvdisk_rows(sections["library"], shape, _folder_for(shape, scratch, plan.weights_dtype),
                          plan.history_tokens, plan.rounds)
    header = {**describe(blas, dtype), "native kernels": native.process_status(), "bench model weights": plan.weights_dtype,
              "rounds": plan.rounds}
    return Report(header, list(sections.values()))


async def _engine_sections(sections: dict[str, Section], plan: "Plan", name: str, contenders: Contenders,
                           progress: Progress) -> None:
    last = name == plan.shapes[-1] or name == "model"
    if "decode" in sections:
        progress(f"bench: decode {name}")
        await decode_section(sections["decode"], name, contenders, plan.decode_tokens, plan.rounds,
                             plan.decode_seconds)
    if "ttft" in sections and (last or not plan.sections or len(plan.shapes) > 2):
        progress(f"bench: TTFT {name}")
        await ttft_section(sections["ttft"], name, contenders, plan.history_tokens, plan.rounds)
    if "branch" in sections and (last or len(plan.shapes) > 2):
        progress(f"bench: branching {name}")
        await branch_section(sections["branch"], name, contenders, plan.history_tokens, plan.reply_tokens,
                             plan.rounds)
    if "preview" in sections and (last or len(plan.shapes) > 2):
        from engine.bench.preview_section import preview_section

        progress(f"bench: previews {name}")
        await preview_section(sections["preview"], name, contenders, plan.history_tokens, plan.rounds)
