"""How many threads llama.cpp runs with when the user does not say."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

ENV_THREADS = "LOGITSCOPE_GGUF_THREADS"


def default_threads(cpus: int | None = None) -> int:
    """llama.cpp's thread count unless the user sets one: ``LOGITSCOPE_GGUF_THREADS``, else half
    the CPUs this process may use (`cpus`: that count, read when None), from 1 to 8.

    Why half: besides llama.cpp's threads, a GGUF turn keeps two others busy, the statistics
    thread (`engine.gguf.decoder`) and the caller's (the TUI drawing each token). Measured on an
    idle 2-core machine (`logitscope bench --sections gguf`): llama.cpp's bare loop ran 1.23x
    (30M) and 1.32x (Qwen2.5-0.5B shape) faster on 2 threads than on 1, but ours ran 0.44x and
    0.86x, because llama.cpp's threads wait for each other at every operation and one of them
    then shares a core. Half the CPUs is also llama.cpp's own default on machines with two
    hardware threads per core (it counts physical cores); 8 caps it where more stop paying.
    """
    raw = os.environ.get(ENV_THREADS, "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return max(1, min(8, (cpus if cpus is not None else _usable_cpus()) // 2))


def env_threads() -> int:
    """LOGITSCOPE_GGUF_THREADS when it names a count, else 0 (automatic)."""
    raw = os.environ.get(ENV_THREADS, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else 0


def _usable_cpus() -> int:
    """The CPUs this process may run on (a container's or `taskset`'s limit included)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity call
        return os.cpu_count() or 1


def candidate_threads(cpus: int | None = None) -> tuple[int, ...]:
    """The thread counts a load measures when the user set none (#31.1): half the CPUs (the rule
    above), all but one (a core left to the statistics thread and the screen), and all of them,
    at most 8. Two cores: (1, 2); eight: (4, 7, 8)."""
    n = cpus if cpus is not None else _usable_cpus()
    return tuple(sorted({max(1, min(8, n // 2)), max(1, min(8, n - 1)), max(1, min(8, n))}))


def threads_key(model_file: Path, cpus: int | None = None) -> str:
    """What a measured count holds for: this file as it is, this many CPUs, this llama.cpp."""
    try:
        from importlib.metadata import version

        llama = version("llama_cpp_python")
    except Exception:  # noqa: BLE001 - an unknown version only makes the key stricter
        llama = "?"
    stat = model_file.stat()
    n = cpus if cpus is not None else _usable_cpus()
    return f"{model_file.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{n}|{llama}"


def remembered_threads(store: Path, key: str) -> int | None:
    """The count measured for `key` at an earlier load (None: none, or an unreadable store)."""
    try:
        value = json.loads(store.read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return value if type(value) is int and 0 < value <= 64 else None


def remember_threads(store: Path, key: str, threads: int) -> None:
    """Keep `threads` for `key` (written whole, then renamed: never a half-written store). A
    failure only means the next load measures again."""
    try:
        try:
            known = json.loads(store.read_text(encoding="utf-8"))
            known = known if isinstance(known, dict) else {}
        except (OSError, ValueError):
            known = {}
        known[key] = threads
        store.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=store.parent, delete=False, encoding="utf-8") as out:
            json.dump(dict(list(known.items())[-64:]), out)
        os.replace(out.name, store)
    except OSError:
        pass
