"""The bench's preview rows exist and hold the numbers they name (never the timings themselves)."""

from __future__ import annotations

import json

import pytest

from tui.bench import main


@pytest.mark.slow
def test_the_preview_section_reports_its_rows_and_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--quick", "--rounds", "1", "--shapes", "2m", "--history", "200",
                 "--sections", "preview", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    [section] = report["sections"]
    assert section["name"] == "preview" and not section["skipped"]
    labels = [row["label"] for row in section["rows"]]
    assert any(label.startswith("3 previews x 12 tokens") for label in labels)
    assert any("while previews compute" in label for label in labels)
    assert all(row["stat"]["median"] >= 0 for row in section["rows"])
    [target] = [r for r in section["ratios"] if r["label"].startswith("previews / one continuation")]
    assert target["target"] == "<= 2"
