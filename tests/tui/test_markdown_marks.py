"""Markdown highlighting finds constructs in the model's exact text and never changes it."""

from __future__ import annotations

from tui.app.widgets.markdown_marks import markdown_marks

TEXT = ("# Title\n\nSome **bold**, *it* and `co*de*` in snake_case_name, [a](http://x).\n"
        "- one\n1. **two**\n> quo *t*\n---\n```python\nx = 1  # *not*\n```\n## Sub")


def _found(text: str) -> list[tuple[str, str]]:
    return [(role, text[start:end]) for start, end, role in markdown_marks(text)]


def test_constructs_are_found_in_place_with_their_markers() -> None:
    found = _found(TEXT)
    for expected in [("marker", "#"), ("heading", " Title"), ("strong", "bold"), ("marker", "**"),
                     ("emph", "it"), ("code", "co*de*"), ("link", "a"), ("marker", "](http://x)"),
                     ("bullet", "-"), ("bullet", "1."), ("strong", "two"), ("marker", ">"), ("emph", "t"),
                     ("marker", "---"), ("marker", "```python"), ("code", "x = 1  # *not*"),
                     ("marker", "```"), ("heading", " Sub")]:
        assert expected in found, expected
    assert ("emph", "de") not in found and ("emph", "case") not in found and ("emph", "not") not in found


def test_marks_stay_inside_their_line() -> None:
    for start, end, _role in markdown_marks(TEXT):
        assert 0 <= start < end <= len(TEXT) and "\n" not in TEXT[start:end]


def test_an_open_fence_runs_to_the_end() -> None:
    assert _found("```\n**x**") == [("marker", "```"), ("code", "**x**")]


def test_fenced_code_is_coloured_by_its_language() -> None:
    """#30.6: before, a fenced block was one colour whatever its language."""
    from tui.app.widgets.render import mark_style

    text = "x\n```python\ndef f(a):  # hi\n    return 'a' + 1\n```\n```\nplain = 1\n```"
    found = {(text[s:e], role) for s, e, role in markdown_marks(text) if role in ("kw", "str", "comment", "num", "name")}
    assert {("def", "kw"), ("f", "name"), ("# hi", "comment"), ("return", "kw"), ("1", "num")} <= found
    assert not any(part == "plain" for part, _ in found)  # no language named: no colours
    variables = {"text-primary": "#ff0000", "text-success": "#00ff00", "text-warning": "#0000ff",
                 "text-secondary": "#00ffff", "text-accent": "#ffffff"}
    assert len({mark_style(role, variables).color for role in ("kw", "str", "num", "name", "code")}) == 5
