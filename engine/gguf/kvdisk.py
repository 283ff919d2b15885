"""Recent histories' KV caches on disk for GGUF models: `engine.local.kvdisk`'s rules (the same
folder, size cap, least-recently-used eviction, ids sidecar, `MIN_TOKENS` and `MIN_GAIN`), with the
state written and read by llama.cpp itself (``llama_state_seq_save_file`` / ``_load_file`` of the
chat's sequence 0, which also store and check the ids).

Why: a reopened chat on a GGUF model otherwise prefills its whole history again; the MLX engine has
had this since its `DiskKVCache`, the GGUF engine simply never built it. An entry is used only for
the same file (path, size, modification time), the same llama.cpp build and the same KV type, and
only for the ids it shares exactly with the prompt (then cut back to them with
``llama_memory_seq_rm``); anything llama.cpp does not read back whole leaves an empty cache, never
a wrong one. Runs on the engine thread.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.local.kvdisk import MIN_TOKENS, DiskKVCache, _digest
from engine.local.prompt import common_prefix_len

SUFFIX = ".llamastate"  # engine.local.kvdisk's eviction finds these beside the MLX entries


def gguf_key(path: Path, kv_type: str) -> str:
    """What makes two loads the same GGUF model for llama.cpp's state files: the file (resolved
    path, size, modification time), llama-cpp-python's version and the KV cache's type."""
    import llama_cpp

    info = path.stat()
    parts = [str(path.resolve()), f"{info.st_size}:{info.st_mtime_ns}", llama_cpp.__version__, kv_type]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


class LlamaDiskCache(DiskKVCache):
    """`DiskKVCache` for a `engine.gguf.model.LlamaModel` session."""

    def restore(self, session: Any, prompt: Sequence[int]) -> int:
        """Put the longest stored prefix of `prompt` into the session when it beats what the
        session's cache shares by `MIN_GAIN`; returns the ids the session then shares."""
        have = common_prefix_len(session.tokens, prompt)
        best, best_len = self.best_entry(prompt, have)
        if best is None:
            return have
        ids_file, ids = best
        model = session.model
        cache = model.make_cache()  # llama.cpp reads the state into an empty sequence 0
        if not _load_state(model, _state_file(ids_file), ids):
            model.make_cache()
            session.install(cache, [])
            return 0
        model.remove_from(best_len)
        cache[0].offset = best_len
        session.install(cache, list(ids[:best_len]))
        os.utime(ids_file)  # recently used
        return best_len

    def store(self, session: Any) -> bool:
        """Write sequence 0's state and ids (when long enough and not written already), then evict
        least recently used entries over the cap. Never raises."""
        ids = tuple(session.tokens)
        if len(ids) < MIN_TOKENS or ids == self.saved_ids or session.cache[0].offset != len(ids):
            return False
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            stem = self.folder / _digest(list(ids))
            tmp = Path(f"{stem}.tmp{SUFFIX}")
            if not _save_state(session.model, tmp, ids):
                tmp.unlink(missing_ok=True)
                return False
            os.replace(tmp, f"{stem}{SUFFIX}")
            Path(f"{stem}.ids.json").write_text(json.dumps(list(ids)))
        except OSError:
            return False
        self.saved_ids = ids
        self._evict()
        return True


def _state_file(ids_file: Path) -> Path:
    """`<digest>.ids.json` -> `<digest>.llamastate`."""
    return ids_file.parent / (ids_file.name.removesuffix(".ids.json") + SUFFIX)


def _save_state(model: Any, path: Path, ids: Sequence[int]) -> bool:
    """llama.cpp writes sequence 0 (its cells and `ids`) to `path`; False when it wrote nothing."""
    tokens = (model.lib.llama_token * len(ids))(*ids)
    return bool(model.lib.llama_state_seq_save_file(model.context(), str(path).encode(), 0, tokens, len(ids)))


def _load_state(model: Any, path: Path, ids: Sequence[int]) -> bool:
    """llama.cpp reads `path` into sequence 0; True only when it read exactly `ids`."""
    if not path.is_file():
        return False
    room = len(ids) + 1
    tokens = (model.lib.llama_token * room)()
    count = ctypes.c_size_t(0)
    read = model.lib.llama_state_seq_load_file(model.context(), str(path).encode(), 0, tokens, room,
                                               ctypes.byref(count))
    return bool(read) and list(tokens[:count.value]) == list(ids)
