"""`engine.bench.bandwidth`: the memory bound the formats table measures decode speed against."""

from __future__ import annotations

from engine.bench.bandwidth import read_bandwidth, share_of_bound


def test_the_bound_is_a_plausible_read_speed_and_the_share_is_its_percent() -> None:
    bandwidth = read_bandwidth(threads=1, passes=2)
    assert 0.5e9 < bandwidth < 2e12  # bytes/s: from a slow VM to an Apple Max chip's memory
    assert share_of_bound(10.0, 1e8, 2e9) == 50.0  # 10 tok/s x 100 MB = 1 GB/s of 2
    assert share_of_bound(10.0, 1e8, 0.0) == 0.0
