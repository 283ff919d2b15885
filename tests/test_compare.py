"""Two models' tokens for the same text, aligned by characters (`engine.core.compare`)."""

from __future__ import annotations

import math

from engine.core.api import Candidate, TokenEvent
from engine.core.compare import align


def _t(piece: str, p: float, top: str | None = None) -> TokenEvent:
    cands = (Candidate(1, top, math.log(0.9), None),) if top is not None else ()
    return TokenEvent(0, 1, piece, piece, math.log(p), None, 1, 1.0, cands)


def test_the_same_tokens_make_one_span_each_with_the_log_ratio() -> None:
    a = [_t("The", 0.5, "The"), _t(" cat", 0.25, " dog")]
    b = [_t("The", 0.25, "The"), _t(" cat", 0.5, " cat")]
    spans = align(a, b)
    assert [(s.start, s.end, s.a, s.b, s.exact) for s in spans] == [(0, 3, (0,), (0,), True), (3, 6, (1,), (1,), True)]
    assert math.isclose(spans[0].log_ratio, math.log(2)) and math.isclose(spans[1].log_ratio, -math.log(2))
    assert not spans[0].tops_differ and spans[1].tops_differ


def test_a_word_split_differently_is_one_span_with_the_product_of_its_tokens() -> None:
    a = [_t("un", 0.5), _t("happy", 0.5), _t(" day", 0.8)]
    b = [_t("unhappy", 0.2), _t(" d", 0.5), _t("ay", 0.9)]
    spans = align(a, b)
    assert [(s.start, s.end, s.a, s.b) for s in spans] == [(0, 7, (0, 1), (0,)), (7, 10, (2,), (1, 2))]
    assert math.isclose(spans[0].a_logprob, math.log(0.25)) and math.isclose(spans[1].b_logprob, math.log(0.45))
    assert all(s.exact for s in spans)


def test_texts_that_part_leave_the_rest_as_one_inexact_span() -> None:
    a = [_t("Hi", 0.5), _t(" there", 0.5), _t("!", 0.5)]
    b = [_t("Hi", 0.5), _t(" th\u00e9re", 0.5), _t("!", 0.5)]  # another tokenizer changed a letter
    spans = align(a, b)
    assert [(s.a, s.b, s.exact) for s in spans] == [((0,), (0,), True), ((1, 2), (1, 2), False)]
    assert spans[-1].end == len("Hithere!")


def test_white_space_marked_differently_still_aligns() -> None:
    a = [_t("Once", 0.5), _t(" upon", 0.5, " upon"), _t("\n", 0.5), _t(" a", 0.5)]
    b = [_t("Once", 0.5), _t("upon", 0.25, "in"), _t("a", 0.5)]  # spaces dropped, no newline token
    spans = align(a, b)
    assert [(s.a, s.b, s.exact) for s in spans] == [((0,), (0,), True), ((1,), (1,), True), ((2, 3), (2,), True)]
    assert spans[1].tops_differ and not align([_t(" x", 0.5, " y")], [_t("x", 0.5, "y")])[0].tops_differ


def test_one_side_longer_ends_with_its_rest_and_empty_sides_give_nothing() -> None:
    spans = align([_t("a", 0.5)], [_t("a", 0.5), _t("b", 0.5)])
    assert [(s.a, s.b, s.exact) for s in spans] == [((0,), (0,), True), ((), (1,), False)]
    trailing = align([_t("a", 0.5)], [_t("a", 0.5), _t("\n", 0.5)])
    assert [(s.a, s.b, s.exact) for s in trailing] == [((0,), (0,), True), ((), (1,), True)]
    assert align([], []) == []
    assert [(s.a, s.b) for s in align([], [_t("x", 0.5)])] == [((), (0,))]


def test_impossible_on_both_sides_is_no_disagreement() -> None:
    span = align([_t("x", 0.0 + 1e-300)], [_t("x", 1e-300)])[0]
    assert span.log_ratio == 0.0
    a = TokenEvent(0, 1, "x", "x", -math.inf, None, 1, 1.0, ())
    assert align([a], [a])[0].log_ratio == 0.0
