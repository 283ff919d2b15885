"""The KV cache of recent conversations on disk, so a reopened chat (or a new process) starts
from its history's keys and values instead of reading the whole history again.

Each entry is mlx-lm's `save_prompt_cache` file plus the exact token ids it holds (a sidecar
JSON), under a folder per model key: the model's folder, its weight files' sizes and times and
the compute dtype. An entry is used only when that key matches and only for the ids it shares
exactly with the prompt (then trimmed to them); anything else about it (unreadable, another
shape, ids that do not match its metadata) means it is never used. Only caches made of plain
`KVCache` layers are kept (a sliding window or an SSM state cannot be trimmed to a prefix).

The folder has a size cap; the least recently used entries go first. Runs on the engine thread
(it imports MLX); writing happens when the thread is idle, never inside a turn.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import (
    KVCache,
    load_prompt_cache,
    save_prompt_cache,
    trim_prompt_cache,
)

from engine.local.prompt import common_prefix_len
from engine.core.regular import read_regular_text, require_regular

MIN_TOKENS = 256  # a shorter history prefills faster than a file loads
MIN_GAIN = 128  # restore only when the disk holds at least this many more shared ids than the cache


def model_key(folder: str, dtype: str) -> str:
    """What makes two loads the same model: the folder, each weight/config file's size and
    modification time, and the compute dtype."""
    root = Path(folder)
    parts = [str(root.resolve()), dtype]
    for path in sorted(root.glob("*.safetensors")) + sorted(root.glob("*.json")):
        info = path.stat()
        parts.append(f"{path.name}:{info.st_size}:{info.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


class DiskKVCache:
    """Entries for one model key in `root / key`, with `cap_bytes` for the whole root."""

    def __init__(self, root: Path, key: str, cap_bytes: int) -> None:
        self.root, self.key, self.cap_bytes = root, key, cap_bytes
        self.folder = root / key
        self.saved_ids: tuple[int, ...] = ()  # what the session last wrote (no rewrite of the same)
        self._ids: dict[str, list[int] | None] = {}  # each entry's ids, read once (every turn looks)

    def restore(self, session: Any, prompt: Sequence[int]) -> int:
        """Put the longest stored prefix of `prompt` into the session when it beats what the
        session's cache shares by `MIN_GAIN`; returns the ids the session then shares."""
        have = common_prefix_len(session.tokens, prompt)
        best, best_len = self.best_entry(prompt, have)
        if best is None:
            return have
        loaded = self._load(*best)
        if loaded is None:
            return have
        cache, ids = loaded
        drop = len(ids) - best_len
        if drop and trim_prompt_cache(cache, drop) != drop:
            return have
        mx.eval([array for layer in cache for array in (layer.keys, layer.values)])  # read it now: a warm-up
        session.install(cache, list(ids[:best_len]))  # reads it while the user types, not in the next turn
        os.utime(best[0])  # recently used
        return best_len

    def best_entry(self, prompt: Sequence[int], have: int) -> tuple[tuple[Path, list[int]] | None, int]:
        """The stored entry sharing the longest prefix with `prompt`, when it beats `have` by
        `MIN_GAIN` ((ids file, its ids), shared length; None otherwise). Each entry's ids are read
        once and remembered (every turn looks)."""
        best, best_len = None, have + MIN_GAIN - 1
        for ids_file in self._entries():
            ids = self._ids.get(ids_file.name) if ids_file.name in self._ids else _read_ids(ids_file)
            self._ids[ids_file.name] = ids
            shared = common_prefix_len(ids, prompt) if ids is not None else 0
            if shared > best_len and ids is not None:
                best, best_len = (ids_file, ids), shared
        return best, best_len

    def _load(self, ids_file: Path, ids: list[int]) -> tuple[list[Any], list[int]] | None:
        """The cache file, checked: same key and the same ids in its metadata, plain KV layers
        holding exactly that many positions. None for anything else."""
        try:
            require_regular(_data_file(ids_file))  # mlx opens it itself: a FIFO there would hang the turn
            cache, meta = load_prompt_cache(str(_data_file(ids_file)), return_metadata=True)
        except Exception:  # noqa: BLE001 - a damaged or foreign file is simply not used
            return None
        same = meta.get("key") == self.key and meta.get("ids") == _digest(ids)
        if not same or not all(type(c) is KVCache and c.offset == len(ids) for c in cache):
            return None
        return cache, ids

    def store(self, session: Any) -> bool:
        """Write the session's cache and ids (when long enough, plain KV layers, not written
        already), then evict least recently used entries over the cap. Never raises."""
        ids = tuple(session.tokens)
        if len(ids) < MIN_TOKENS or ids == self.saved_ids:
            return False
        if not all(type(c) is KVCache and c.offset == len(ids) for c in session.cache):
            return False
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            stem = self.folder / _digest(list(ids))
            tmp = Path(f"{stem}.tmp.safetensors")
            save_prompt_cache(str(tmp), session.cache, {"key": self.key, "ids": _digest(list(ids))})
            os.replace(tmp, f"{stem}.safetensors")
            Path(f"{stem}.ids.json").write_text(json.dumps(list(ids)))
        except OSError:
            return False
        self.saved_ids = ids
        self._evict()
        return True

    def _entries(self) -> list[Path]:
        try:
            return sorted(self.folder.glob("*.ids.json"))
        except OSError:
            return []

    def _evict(self) -> None:
        """Least recently used first (an entry's ids file is touched when it is used)."""
        entries = list(self.root.glob("*/*.ids.json"))
        entries.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        total = 0
        for ids_file in entries:
            data = _data_file(ids_file)
            size = (data.stat().st_size if data.exists() else 0) + ids_file.stat().st_size
            total += size
            if total > self.cap_bytes:
                data.unlink(missing_ok=True)
                ids_file.unlink(missing_ok=True)


def _data_file(ids_file: Path) -> Path:
    """`<digest>.ids.json` -> `<digest>.safetensors`, or the GGUF engine's `<digest>.llamastate`
    (`engine.gguf.kvdisk`) when that is the one there (eviction counts and removes either)."""
    stem = ids_file.name.removesuffix(".ids.json")
    llama = ids_file.parent / (stem + ".llamastate")
    return llama if llama.exists() else ids_file.parent / (stem + ".safetensors")


def _digest(ids: Sequence[int]) -> str:
    return hashlib.sha256(json.dumps(list(ids)).encode()).hexdigest()[:32]


def _read_ids(path: Path) -> list[int] | None:
    try:
        ids = json.loads(read_regular_text(path))
    except (OSError, ValueError):
        return None
    return ids if isinstance(ids, list) and all(isinstance(i, int) for i in ids) else None
