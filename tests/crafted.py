"""Crafted (hostile) model files built from the tiny test models, for the untrusted-input tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path


def escaping_tokenizer(source: Path, folder: Path) -> Path:
    """A copy of the model in `source` whose tokenizer makes replies full of terminal escapes.

    The byte-level alphabet is relabelled so that the bytes of "e" and "a" decode as ESC and BEL
    (byte-level BPE writes byte 0x1b as "ě", 0x07 as "ć"): it encodes and merges exactly as
    before, and what the model says comes out with escapes in it.
    """
    shutil.copytree(source, folder)
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    special = {token["content"] for token in data["added_tokens"]}
    swap = str.maketrans({"e": "ě", "ě": "e", "a": "ć", "ć": "a"})
    model = data["model"]
    model["vocab"] = {k if k in special else k.translate(swap): v for k, v in model["vocab"].items()}
    model["merges"] = [m.translate(swap) if isinstance(m, str) else [p.translate(swap) for p in m]
                       for m in model["merges"]]
    path.write_text(json.dumps(data), encoding="utf-8")
    return folder
