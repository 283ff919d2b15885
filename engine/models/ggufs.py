"""GGUF files as the model picker finds them: which specs name one, which files a folder holds,
and what each one is (its size and quantization), read without llama.cpp, MLX or the ``gguf``
package, so the base install lists them and says what loading them needs.

Why our own header reader: the quantization is a single key (``general.file_type``) near the
top of the file; the ``gguf`` package comes only with the ``[gguf]`` extra and maps the whole file.
A file that cannot be read is still listed ("GGUF", no quantization): the load says what is wrong.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import BinaryIO

from engine.core.regular import open_regular

SUFFIX = ".gguf"
# ``owner/repo/file.gguf`` or ``owner/repo/folder/file.gguf``: a file in a Hugging Face repo
HUB_FILE = re.compile(r"([A-Za-z0-9][\w.-]*/[\w.-]+)/((?:[\w.-]+/)*[^/]+\.gguf)", re.IGNORECASE)
_SHARD = re.compile(r"-(\d{5})-of-(\d{5})$")  # llama.cpp's split files: it loads the first, finds the rest
_QUANT = re.compile(r"(?<![A-Za-z0-9])(I?Q[1-8](?:_[0-9A-Z]{1,4}){0,2}|BF16|F16|F32|TQ[12]_0|MXFP4(?:_MOE)?)"
                    r"(?![A-Za-z0-9])", re.IGNORECASE)
FILE_TYPES = {  # llama.cpp's LLAMA_FTYPE_MOSTLY_* (gguf.LlamaFileType)
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
    36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0",
}
FOLDER_LIMIT = 200  # files listed from one folder: a typed path must not flood the picker
_SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value type -> bytes
_STRING, _ARRAY, _UINT32 = 8, 9, 4
_KEY_LIMIT = 4096  # a key longer than this is a damaged header, not a key


def is_gguf_spec(spec: str) -> bool:
    """Whether a model spec names a GGUF file (by its suffix; the file is checked at load)."""
    return spec.strip().lower().endswith(SUFFIX)


def hub_file(spec: str) -> tuple[str, str] | None:
    """(repo id, file in it) when `spec` is ``owner/repo/[folder/]file.gguf`` and not a local path."""
    found = HUB_FILE.fullmatch(spec.strip())
    if found is None or Path(spec.strip()).expanduser().exists():
        return None
    return found.group(1), found.group(2)


def is_first_file(path: Path) -> bool:
    """False for the second and later parts of a split model (only the first one is loaded)."""
    shard = _SHARD.search(path.stem)
    return shard is None or int(shard.group(1)) == 1


def file_size(path: Path) -> int:
    """Bytes on disk, every part of a split model counted; 0 when unknown."""
    shard = _SHARD.search(path.stem)
    parts = [path]
    if shard is not None:
        stem = path.stem[: shard.start()]
        parts = [path.with_name(f"{stem}-{i:05d}-of-{shard.group(2)}{path.suffix}") for i in range(1, int(shard.group(2)) + 1)]
    total = 0
    for part in parts:
        try:
            total += part.stat().st_size
        except OSError:
            continue
    return total


def quantization(path: Path) -> str:
    """The weight type ("Q4_K_M", "F16"): from the file name when it says, else from the header;
    "" when neither does."""
    named = _QUANT.search(path.stem)
    if named is not None:
        return named.group(1).upper()
    return FILE_TYPES.get(header_file_type(path) if path.is_file() else -1, "")


def header_file_type(path: Path) -> int:
    """``general.file_type`` from the file's header, or -1 (not GGUF v2+, key absent, unreadable)."""
    try:
        with open_regular(path) as handle:
            return _find_file_type(handle)
    except (OSError, struct.error, ValueError, UnicodeDecodeError):
        return -1


def _find_file_type(handle: BinaryIO) -> int:
    """Walk the key/value section (skipping every value but the one wanted) up to that key."""
    if handle.read(4) != b"GGUF" or _read(handle, "<I") < 2:  # version 1 used 32-bit lengths
        return -1
    _read(handle, "<Q")  # tensor count
    for _ in range(_read(handle, "<Q")):
        key = _read_string(handle)
        kind = _read(handle, "<I")
        if key == "general.file_type" and kind == _UINT32:
            return int(_read(handle, "<I"))
        _skip_value(handle, kind)
    return -1


def _read(handle: BinaryIO, layout: str) -> int:
    """One little-endian number; struct.error at the end of the file."""
    return int(struct.unpack(layout, handle.read(struct.calcsize(layout)))[0])


def _read_string(handle: BinaryIO) -> str:
    """A GGUF string: a 64-bit length, then UTF-8 bytes."""
    length = _read(handle, "<Q")
    if length > _KEY_LIMIT:
        raise ValueError("not a key")
    return handle.read(length).decode("utf-8")


def _skip_value(handle: BinaryIO, kind: int) -> None:
    """Seek past one value of GGUF type `kind` (an array of strings item by item)."""
    if kind in _SCALARS:
        handle.seek(_SCALARS[kind], 1)
    elif kind == _STRING:
        handle.seek(_read(handle, "<Q"), 1)
    elif kind == _ARRAY:
        item, count = _read(handle, "<I"), _read(handle, "<Q")
        if item in _SCALARS:
            handle.seek(_SCALARS[item] * count, 1)
        else:
            for _ in range(count):
                _skip_value(handle, item)
    else:
        raise ValueError(f"unknown GGUF value type {kind}")


def files_in(folder: Path, *, deep: bool = False, limit: int = FOLDER_LIMIT) -> list[Path]:
    """The loadable ``.gguf`` files in `folder` and its direct subfolders (every level with
    `deep`: a Hugging Face snapshot, never a typed path, which may be ``/``), first parts of
    split models only, sorted; at most `limit`."""
    patterns = ("**/*" + SUFFIX,) if deep else ("*" + SUFFIX, "*/*" + SUFFIX)
    found: list[Path] = []
    try:
        for pattern in patterns:
            found.extend(p for p in folder.glob(pattern) if p.is_file() and is_first_file(p))
    except OSError:
        pass  # an unreadable subfolder ends the walk; what was found is still listed
    return sorted(found)[:limit]
