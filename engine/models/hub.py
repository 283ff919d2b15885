"""Where a model comes from: the demo, a local folder or the Hugging Face hub, checked before loading.

Nothing here imports MLX, so the TUI's model picker (`list_local_models`) and the CLI can use it
freely. `engine.models` calls `resolve_model` and `check_model_folder` on the engine thread before
it hands the folder to mlx-lm: every way a model can be wrong is caught here first and turned into
one line that says what to do, instead of a traceback from deep inside a loader. Downloading is
`engine.models.download`; the picker's GGUF files (HF cache, typed folders) are read by
`engine.models.ggufs`.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from engine.core.api import ModelLoadError
from engine.models import ggufs
from engine.models.download import ALLOW_PATTERNS, Report, download_model, one_line  # noqa: F401 - re-exported
from engine.models.download import download_error as _download_error  # noqa: F401 - the tests' old names
from engine.models.download import progress_class as _progress_class  # noqa: F401
from engine.core.settings.files import read_regular_text
from engine.core.regular import NotRegularFile, first_irregular, open_regular
from engine.core.settings.paths import state_dir

DEMO_SPEC = "demo"

_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_FOREIGN_WEIGHTS = ("pytorch_model*.bin", "*.pt", "*.pth", "*.gguf", "*.ckpt", "tf_model.h5")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tiktoken.model", "*.tiktoken", "vocab.json")


def demo_model_path() -> Path:
    """The small chat model that ships inside the package (``engine/models/demo_model/``)."""
    return Path(__file__).resolve().parent / "demo_model"


def looks_like_repo_id(spec: str) -> bool:
    """True for ``owner/name`` that is not an existing local path."""
    return bool(_REPO_ID.fullmatch(spec)) and not Path(spec).expanduser().exists()


def resolve_model(spec: str, report: Report) -> tuple[Path, str]:
    """The local folder for `spec` and a short display name, downloading from the hub if needed."""
    spec = spec.strip()
    if not spec:
        raise ModelLoadError('no model given: pass a model folder, a Hugging Face repo id or "demo"')
    if spec == DEMO_SPEC:
        path = demo_model_path()
        if not path.is_dir():
            raise ModelLoadError(f"the demo model is missing from this install (expected {path}); reinstall logitscope")
        return path, DEMO_SPEC
    if looks_like_repo_id(spec):
        return download_model(spec, report), spec
    path = Path(spec).expanduser()
    if not path.exists():
        raise ModelLoadError(
            f"model folder not found: {spec} (give a folder, a Hugging Face repo id like "
            'mlx-community/Qwen3-0.6B-4bit, or "demo")'
        )
    return path.resolve(), path.resolve().name


# ---------------------------------------------------------------------------------------------
# Checking a folder before MLX sees it


@functools.lru_cache(maxsize=1)
def _mlx_lm_models() -> tuple[frozenset[str], dict[str, str]]:
    """mlx-lm's model modules and its model_type remapping, read without importing mlx-lm.

    Importing mlx_lm would load MLX, which the TUI must not do; its model modules are plain files
    and MODEL_REMAPPING is a literal dict in utils.py, so both can be read from disk.
    """
    spec = importlib.util.find_spec("mlx_lm")
    if spec is None or not spec.submodule_search_locations:
        return frozenset(), {}
    root = Path(list(spec.submodule_search_locations)[0])
    types = frozenset(p.stem for p in (root / "models").glob("*.py") if not p.stem.startswith("_"))
    return types, _read_remapping(root / "utils.py")


def _read_remapping(utils_py: Path) -> dict[str, str]:
    """MODEL_REMAPPING from mlx_lm/utils.py ({} if it moved: then only direct names match)."""
    try:
        tree = ast.parse(utils_py.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "MODEL_REMAPPING" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return {}
            return {str(k): str(v) for k, v in value.items()}
    return {}


def is_supported_model_type(model_type: str) -> bool:
    """Whether the installed mlx-lm has an implementation for this config.json model_type."""
    types, remapping = _mlx_lm_models()
    return remapping.get(model_type, model_type) in types


def _has_any(folder: Path, patterns: tuple[str, ...]) -> bool:
    """Whether any file in `folder` matches one of the glob `patterns` (used to explain a refusal)."""
    return any(any(folder.glob(pattern)) for pattern in patterns)


def _not_mlx(name: str) -> ModelLoadError:
    """The usual mistake (a PyTorch or GGUF repo), said once for both places that detect it."""
    return ModelLoadError(
        f"{name} is not an MLX model (no model*.safetensors weights, only PyTorch/GGUF files); "
        "pick an MLX build (e.g. from mlx-community) or convert it with `mlx_lm.convert`"
    )


def read_config(folder: Path, name: str) -> dict[str, Any]:
    """config.json as a dict, or one line saying why the folder is not a model."""
    config_file = folder / "config.json"
    if not folder.is_dir():
        raise ModelLoadError(f"{name} is a file, not a model folder: {folder}")
    if not config_file.is_file():
        if _has_any(folder, _FOREIGN_WEIGHTS):
            raise _not_mlx(name)
        raise ModelLoadError(f"{name} is not a model folder (no config.json in {folder})")
    try:
        config = json.loads(read_regular_text(config_file))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelLoadError(f"{name}: config.json is unreadable ({one_line(error)})") from error
    if not isinstance(config, dict):
        raise ModelLoadError(f"{name}: config.json is not a JSON object")
    return config


def check_model_folder(folder: Path, name: str, *, trust_remote_code: bool) -> dict[str, Any]:
    """Everything that can be checked without MLX: config, architecture, weights, tokenizer."""
    config = read_config(folder, name)
    odd = first_irregular(folder)
    if odd is not None:  # mlx-lm and transformers open what they find: a FIFO there hangs the load
        raise ModelLoadError(f"{name}: {odd.name} is {NotRegularFile(odd, odd.stat().st_mode).strerror}: "
                             "a model folder holds only files and folders")
    model_file = config.get("model_file")
    if model_file is not None and not trust_remote_code:
        raise ModelLoadError(
            f"{name} runs its own Python code ({model_file}) to build the model; allow it with "
            "--trust-remote-code (trust_remote_code = true) only if you trust its author"
        )
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ModelLoadError(f"{name}: config.json has no model_type, so the architecture is unknown")
    if model_file is None and not is_supported_model_type(model_type):
        raise ModelLoadError(
            f"{name}: unsupported architecture {model_type!r} (this mlx-lm has no implementation for it; "
            "try upgrading mlx-lm)"
        )
    check_weights(folder, name)
    if not _has_any(folder, _TOKENIZER_FILES):
        raise ModelLoadError(f"{name} has no tokenizer (no tokenizer.json, tokenizer.model or tiktoken file)")
    return config


def check_weights(folder: Path, name: str) -> None:
    """Weights exist, every shard the index names is there, and no file is cut short."""
    files = sorted(folder.glob("model*.safetensors"))
    if not files:
        if _has_any(folder, _FOREIGN_WEIGHTS):
            raise _not_mlx(name)
        raise ModelLoadError(f"{name} has no weights (no model*.safetensors in {folder})")
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = set(json.loads(read_regular_text(index)).get("weight_map", {}).values())
        except (OSError, ValueError, AttributeError) as error:
            raise ModelLoadError(f"{name}: model.safetensors.index.json is unreadable ({one_line(error)})") from error
        missing = sorted(s for s in shards if not (folder / s).is_file())
        if missing:
            raise ModelLoadError(
                f"{name} is missing weight file {missing[0]} (of {len(missing)} missing); download it again"
            )
    for file in files:
        check_safetensors(file, name)


def check_safetensors(file: Path, name: str) -> None:
    """A safetensors file is an 8-byte header length, a JSON header, then exactly the tensor bytes.

    Checking that the sizes add up catches an interrupted download or copy before MLX reads it.
    """
    try:
        f = open_regular(file)
    except OSError as error:
        raise ModelLoadError(f"{name}: cannot read weight file {file.name} ({one_line(error)})") from error
    size = os.fstat(f.fileno()).st_size
    with f:
        head = f.read(8)
        if head.startswith(b"version "):
            raise ModelLoadError(f"{name}: {file.name} is a Git LFS pointer, not the weights; run `git lfs pull`")
        length = int.from_bytes(head, "little") if len(head) == 8 else -1
        if not 0 < length <= min(size - 8, 100_000_000):
            raise ModelLoadError(f"{name}: weight file {file.name} is corrupt (bad header); download it again")
        try:
            header = json.loads(f.read(length))
            end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
            bad = f"{name}: weight file {file.name} is corrupt (bad header); download it again"
            raise ModelLoadError(bad) from error
    if 8 + length + end != size:
        raise ModelLoadError(
            f"{name}: weight file {file.name} is truncated or corrupt ({size} bytes, expected {8 + length + end}); "
            "download it again"
        )


def is_loadable_folder(folder: Path) -> bool:
    """A cheap yes/no for the model picker: config, supported architecture, safetensors present."""
    try:
        config = read_config(folder, folder.name)
    except ModelLoadError:
        return False
    model_type = config.get("model_type")
    return (
        isinstance(model_type, str)
        and "model_file" not in config
        and is_supported_model_type(model_type)
        and any(folder.glob("model*.safetensors"))
    )


@dataclass(frozen=True)
class ModelEntry:
    """One row of the model picker. `spec` is what to pass to `EngineAPI.load`."""

    spec: str
    name: str
    source: Literal["demo", "recent", "cache", "folder"]  # folder: found in a path the user typed
    path: str | None  # the local folder or file, or None when it would have to be downloaded
    size_bytes: int = 0  # 0 = unknown
    format: Literal["mlx", "gguf"] = "mlx"  # gguf: one file, run by llama.cpp (the [gguf] extra)
    quant: str = ""  # a GGUF file's weight type ("Q4_K_M"), "" when unknown


# ---------------------------------------------------------------------------------------------
# The model picker: demo, recently used, and what the Hugging Face cache already holds

_RECENT_LIMIT = 12


def normalise_spec(spec: str) -> str:
    """Local folders are remembered (and compared) by absolute path, so they work from any directory."""
    spec = spec.strip()
    if spec == DEMO_SPEC or looks_like_repo_id(spec) or ggufs.hub_file(spec) is not None:
        return spec
    path = Path(spec).expanduser()
    if ggufs.is_gguf_spec(spec):  # a link to a blob keeps its own name (the name is what a GGUF file says)
        return str(path.parent.resolve() / path.name)
    return str(path.resolve())


def recent_models(directory: str | Path | None = None) -> list[str]:
    """Specs loaded recently, newest first; an unreadable history file is just an empty one."""
    file = Path(directory or state_dir()) / "recent.json"
    try:
        data = json.loads(read_regular_text(file))  # a FIFO there must not hang the picker
    except (OSError, ValueError):
        return []
    specs = data.get("recent", []) if isinstance(data, dict) else []
    return [s for s in specs if isinstance(s, str) and s][:_RECENT_LIMIT]


def record_recent(spec: str, directory: str | Path | None = None) -> None:
    """Put `spec` first in the recent list. Best effort: a read-only home never breaks loading."""
    folder = Path(directory or state_dir())
    spec = normalise_spec(spec)
    specs = [spec] + [s for s in recent_models(folder) if s != spec]
    temporary: Path | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=folder, prefix=".recent-", suffix=".json.tmp")  # unique: no clash
        temporary = Path(name)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"recent": specs[:_RECENT_LIMIT]}, indent=1))
        temporary.replace(folder / "recent.json")
    except OSError:
        if temporary is not None:  # a full disk leaves nothing behind
            temporary.unlink(missing_ok=True)


def cached_models(cache_dir: str | Path | None = None) -> list[ModelEntry]:
    """Models in the local Hugging Face cache (newest revision of each repo): the repo if mlx-lm
    can load it, and each GGUF file it holds as ``owner/repo/file.gguf``."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir(cache_dir)
    except (CacheNotFound, OSError, ValueError):
        return []
    entries = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id.lower()):
        if repo.repo_type != "model" or not repo.revisions:
            continue
        snapshot = Path(max(repo.revisions, key=lambda r: r.last_modified).snapshot_path)
        if is_loadable_folder(snapshot):
            entries.append(ModelEntry(repo.repo_id, repo.repo_id, "cache", str(snapshot), repo.size_on_disk))
        for file in ggufs.files_in(snapshot, deep=True):
            spec = f"{repo.repo_id}/{file.relative_to(snapshot).as_posix()}"
            entries.append(gguf_entry(file, spec, spec, "cache"))
    return entries


def gguf_entry(file: Path, spec: str, name: str, source: Literal["recent", "cache", "folder"]) -> ModelEntry:
    """A picker row for a local GGUF file: its size (every part of a split model) and quantization."""
    return ModelEntry(spec, name, source, str(file), ggufs.file_size(file), "gguf", ggufs.quantization(file))


def folder_models(typed: str) -> list[ModelEntry]:
    """What a path the user typed holds: the MLX model it is or the MLX models in its direct
    subfolders (a parent folder such as ~/models, #30.7), and the GGUF files in it (or the GGUF
    file it is). Never raises: a path that is not there holds nothing."""
    path = Path(typed.strip()).expanduser()
    try:
        if path.is_file():
            is_gguf = ggufs.is_gguf_spec(path.name)
            return [gguf_entry(path, normalise_spec(str(path)), path.name, "folder")] if is_gguf else []
        if not path.is_dir():
            return []
    except OSError:
        return []
    folder = path.resolve()
    found = [ModelEntry(str(sub), sub.relative_to(folder.parent).as_posix(), "folder", str(sub))
             for sub in [folder, *_subfolders(folder)] if is_loadable_folder(sub)]
    return found + [gguf_entry(f, normalise_spec(str(f)), f.relative_to(folder).as_posix(), "folder")
                    for f in ggufs.files_in(folder)]


def _subfolders(folder: Path) -> list[Path]:
    """The direct subfolders of a typed folder, sorted, at most `ggufs.FOLDER_LIMIT` (a typed
    path may be ``/`` or a huge mount: only one level, and only so many)."""
    found: list[Path] = []
    try:
        for entry in folder.iterdir():
            if entry.is_dir() and not entry.name.startswith("."):
                found.append(entry)
                if len(found) >= ggufs.FOLDER_LIMIT:
                    break
    except OSError:
        pass  # unreadable: what was found is still listed
    return sorted(found)


def _recent_entry(spec: str) -> ModelEntry | None:
    """A recent spec that is not in the cache list: a repo to download, a folder, a GGUF file."""
    if looks_like_repo_id(spec) or ggufs.hub_file(spec) is not None:
        return ModelEntry(spec, spec, "recent", None, format="gguf" if ggufs.is_gguf_spec(spec) else "mlx")
    path = Path(spec)
    if ggufs.is_gguf_spec(spec) and path.is_file():
        return gguf_entry(path, spec, path.name, "recent")
    return ModelEntry(spec, path.name, "recent", spec) if path.is_dir() else None


def list_local_models(cache_dir: str | Path | None = None, state: str | Path | None = None) -> list[ModelEntry]:
    """The picker's list: the demo, then recently used models, then the rest of the HF cache, then
    the other GGUF files in the folders of recently used ones (where this user keeps them)."""
    cached = {entry.spec: entry for entry in cached_models(cache_dir)}
    entries: list[ModelEntry] = []
    if demo_model_path().is_dir():
        entries.append(ModelEntry(DEMO_SPEC, "demo", "demo", str(demo_model_path())))  # the row adds "built-in"
    for spec in recent_models(state):
        if spec == DEMO_SPEC:
            continue
        entry = replace(cached.pop(spec), source="recent") if spec in cached else _recent_entry(spec)
        if entry is not None:
            entries.append(entry)
    entries += cached.values()
    return entries + _beside_recent(entries)


def _beside_recent(listed: list[ModelEntry]) -> list[ModelEntry]:
    """GGUF files in the folders of the recent local GGUF files (each folder once), not listed yet."""
    folders = dict.fromkeys(Path(e.spec).parent for e in listed
                            if e.source == "recent" and e.format == "gguf" and Path(e.spec).is_absolute())
    seen = {e.spec for e in listed}
    found: list[ModelEntry] = []
    for folder in folders:
        for entry in folder_models(str(folder)):
            if entry.format == "gguf" and entry.spec not in seen:
                seen.add(entry.spec)
                found.append(entry)
    return found
