"""JSON as every parser reads it: no ``NaN``, no ``Infinity``.

Python's `json.dumps` writes a non-finite float as the bare words ``NaN`` / ``Infinity`` by
default, which strict parsers (JavaScript's ``JSON.parse``, jq, Go, Rust's serde) refuse: an
export holding one impossible token's ``-inf`` logprob could not be read anywhere else. Every
JSON this app writes (exports, ``run --json``, saved files, the library) goes through `dumps`:
a non-finite number becomes null, which the readers take back as "unknown" (or ``-inf`` for a
logprob, `engine.core.chat.fileformat`).
"""

from __future__ import annotations

import json
import math
from typing import Any


def dumps(value: Any, **options: Any) -> str:
    """`json.dumps` with ``allow_nan=False``, non-finite floats written as null. The common case
    (nothing to replace) costs one plain dump; only a document that holds one is walked."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError as exc:
        if "Out of range float" not in str(exc):
            raise
    return json.dumps(finite(value), allow_nan=False, **options)


def finite(value: Any) -> Any:
    """`value` with every non-finite float inside it replaced by None (a loop, not a recursion:
    a document may nest as deep as a conversation is long)."""
    top: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(top, 0)]
    while stack:
        owner, key = stack.pop()
        item = owner[key]
        if isinstance(item, float) and not math.isfinite(item):
            owner[key] = None
        elif isinstance(item, dict):
            copy = dict(item)
            owner[key] = copy
            stack.extend((copy, k) for k in copy)
        elif isinstance(item, (list, tuple)):
            copy_list = list(item)
            owner[key] = copy_list
            stack.extend((copy_list, i) for i in range(len(copy_list)))
    return top[0]
