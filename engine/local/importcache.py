"""transformers' lazy-import table, kept between runs: the largest part of loading mlx-lm.

Why: transformers 5 builds the table its lazy modules import from by reading every file under
``transformers/models`` (about 3,400) at each start (`create_import_structure_from_path`). On a
2-core machine that was 1-1.5 s of CPU, some 40% of importing mlx-lm, which every model load
needs (measured for #30.8: logitscope ready later than ``mlx_lm.chat`` on the same model). The
table only changes when transformers does, so it is written once to the cache folder, keyed by
transformers' version and the folder it describes (with its modification time), and read from
there afterwards.

Transformers 5 asks for that table with ``models/__init__.py`` (a file: the function then scans
its folder), earlier ones with the folder; both are the folder's table here. Keyed by the folder
alone, the file form missed the cache at every start, unnoticed (the test asked with the
folder): `tests/test_import_cache.py` now imports transformers as mlx-lm does and counts the
folders listed.

How: an import hook wraps that one function when ``transformers.utils.import_utils`` is executed,
before transformers' own ``__init__`` calls it. Anything unexpected (another transformers, an
unreadable or malformed cache file) leaves transformers' own function in charge: never an error.
Plain JSON, never pickle: a cache file is data, not code.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

TARGET = "transformers.utils.import_utils"
FUNCTION = "create_import_structure_from_path"
FORMAT = 1


class _Hook(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the real loader of `TARGET` so the function is cached."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        real_exec = spec.loader.exec_module
        folder = self.folder

        def exec_module(module: ModuleType) -> None:
            real_exec(module)
            original = getattr(module, FUNCTION, None)
            if callable(original):
                setattr(module, FUNCTION, cached(getattr(original, "__wrapped__", original), folder))

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install(folder: Path) -> bool:
    """Install the hook (before transformers is imported); False when it is too late or done."""
    if TARGET in sys.modules or any(isinstance(f, _Hook) for f in sys.meta_path):
        return False
    sys.meta_path.insert(0, _Hook(folder))
    return True


def cached(original: Callable[[Any], Any], folder: Path) -> Callable[[Any], Any]:
    """`original` (transformers' scan of a folder), answered from memory when asked again, and
    for the whole ``models`` folder (the scan that reads every file) from `folder`'s copy."""
    memory: dict[str, Any] = {}

    def scan(module_path: Any) -> Any:
        where = str(module_path)
        if os.path.isfile(where):  # transformers 5 asks with ``models/__init__.py``: its folder's table
            where = os.path.dirname(where)
        if where in memory:
            return memory[where]
        file = _file_for(folder, where) if os.path.basename(where) == "models" else None  # the big one
        found = _read(file) if file is not None else None
        if found is None:
            found = original(module_path)
            if file is not None:
                _write(file, found)
        memory[where] = found
        return found

    return scan


def _file_for(folder: Path, where: str) -> Path | None:
    try:
        version = metadata.version("transformers")
        stamp = os.stat(where).st_mtime_ns
    except (OSError, metadata.PackageNotFoundError):
        return None
    key = f"{version}|{os.path.realpath(where)}|{stamp}|{FORMAT}"
    import hashlib

    return folder / f"transformers-imports-{hashlib.sha256(key.encode()).hexdigest()[:20]}.json"


def _read(file: Path) -> Any:
    try:
        return _decode(json.loads(file.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def _write(file: Path, structure: Any) -> None:
    """Atomically (a reader never sees half a file); a cache that cannot be written is skipped."""
    try:
        encoded = json.dumps(_encode(structure))
        file.parent.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=file.parent, prefix=".partial-")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(encoded)
        os.replace(partial, file)
    except (OSError, TypeError, ValueError):
        pass


def _encode(node: Any) -> Any:
    """The nested table as JSON: subfolders by name, backends (frozensets) as sorted lists."""
    folders, groups = {}, []
    for key, value in node.items():
        if isinstance(key, frozenset):
            groups.append([sorted(key), {module: sorted(names) for module, names in value.items()}])
        elif isinstance(key, str):
            folders[key] = _encode(value)
        else:
            raise TypeError(f"unexpected key {type(key).__name__}")
    return {"folders": folders, "groups": groups}


def _decode(data: dict[str, Any]) -> dict[Any, Any]:
    node: dict[Any, Any] = {name: _decode(sub) for name, sub in data["folders"].items()}
    for backends, modules in data["groups"]:
        node[frozenset(backends)] = {module: set(names) for module, names in modules.items()}
    return node
