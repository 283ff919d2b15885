"""The suite itself: two test modules of one name (tests/x.py and tests/tui/x.py) stop pytest's
collection of the whole suite ("import file mismatch"), so CI would run nothing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_test_module_names_are_unique_across_folders() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)
    assert [name for name, count in names.items() if count > 1] == []
