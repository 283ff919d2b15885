"""`logitscope bench --sections library` on a small library: every row is there (the speeds
themselves are the benchmark's to report, not a test's to time)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.bench import library_section as bench
from engine.bench.report import Section
from engine.core.library import Library


@pytest.mark.slow
def test_the_library_section_builds_its_database_and_reports_every_row(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "CHATS", 20)
    monkeypatch.setattr(bench, "TURNS", 3)
    section = Section("library", "library")
    bench.library_section(section, tmp_path, rounds=1)
    labels = [row.label for row in section.rows]
    assert any(label.startswith("filter: one key") for label in labels)
    assert any(label.startswith("screen: key -> filtered rows") for label in labels)
    assert any(label.startswith("screen: Enter on a 2,000-message chat") for label in labels)
    assert "quit with that chat open" in labels
    assert all(row.stat.median > 0 for row in section.rows)
    assert len(Library(tmp_path / "library-bench.sqlite3").entries()) == 21  # 20 built + the streaming save


@pytest.mark.slow
async def test_the_reopen_rows_compare_disk_with_reading_again(chatml_model: Path) -> None:
    from engine.bench.kvdisk_rows import kvdisk_rows

    section = Section("library", "library")
    await kvdisk_rows(section, "tiny", str(chatml_model), 300, rounds=1)
    assert [row.label.split(": ")[-1] for row in section.rows] == [
        "first token, history read again", "first token, KV cache from disk", "first token"]
    assert len(section.ratios) == 2
