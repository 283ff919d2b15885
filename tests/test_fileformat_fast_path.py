"""The fast path for a saved token's candidates accepts and builds exactly what the checked reader
does (it only skips the per-value bookkeeping for the plain form our writers use)."""

from __future__ import annotations

import math

import pytest

from engine.core.chat.fileformat import _candidate, _candidates, _Reader

VALUES = [
    {"id": 5, "text": "a", "logprob": -0.5, "sampled_prob": 0.3},
    {"id": 5, "text": "a", "logprob": None, "sampled_prob": None},
    {"id": -1, "text": "a", "logprob": -math.inf, "sampled_prob": 0.0},
    {"id": 5, "text": "a", "logprob": 0, "sampled_prob": 1},  # ints: the checked reader takes them
    {"id": 5, "text": "a", "logprob": 0.0005, "sampled_prob": 1.0005},  # within the writers' slack
    {"id": 5, "text": "a", "logprob": 0.5, "sampled_prob": 0.3},
    {"id": 5, "text": "a", "logprob": math.nan, "sampled_prob": 0.3},
    {"id": 5, "text": "a", "logprob": math.inf, "sampled_prob": 0.3},
    {"id": 5, "text": "a", "logprob": -0.5, "sampled_prob": math.nan},
    {"id": 5, "text": "a", "logprob": -0.5, "sampled_prob": 1.5},
    {"id": 5, "text": "a", "logprob": -0.5, "sampled_prob": -0.5},
    {"id": 5, "text": "a", "logprob": True, "sampled_prob": 0.3},
    {"id": True, "text": "a", "logprob": -0.5, "sampled_prob": 0.3},
    {"id": -2, "text": "a", "logprob": -0.5, "sampled_prob": 0.3},
    {"id": 2**31, "text": "a", "logprob": -0.5, "sampled_prob": 0.3},
    {"id": 5.0, "text": "a", "logprob": -0.5, "sampled_prob": 0.3},
    {"id": 5, "text": 7, "logprob": -0.5, "sampled_prob": 0.3},
    {"id": 5, "logprob": -0.5, "sampled_prob": 0.3},
    {"id": 5, "text": "a", "sampled_prob": 0.3},
    ["not", "a", "dict"],
    None,
]


@pytest.mark.parametrize("value", VALUES, ids=[str(i) for i in range(len(VALUES))])
def test_the_fast_path_agrees_with_the_checked_reader(value: object) -> None:
    try:
        expected: object = _candidate(_Reader(value, "t.candidates[0]"))
    except ValueError as exc:
        expected = str(exc)
    try:
        got: object = _candidates(_Reader([value], "t.candidates"))[0]
    except ValueError as exc:
        got = str(exc)
    assert repr(got) == repr(expected)


def test_a_candidates_field_that_is_not_a_list_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"t.candidates: expected a list"):
        _candidates(_Reader({"id": 1}, "t.candidates"))
