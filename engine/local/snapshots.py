"""Copies of the cache layers that cannot be trimmed, so a rewind does not read the history again.

Why: a regenerate, a branch or an edit of the newest message rewinds the cache to where the new
conversation parts from the old one. A `KVCache` is cut back in place, but SSM state (Mamba,
Mamba-2, the recurrent layers of hybrids such as Granite-4-H, Qwen3-Next, LFM2, Falcon-H1) holds
the whole history folded into one state, and a sliding-window `RotatingKVCache` that has wrapped
has overwritten what it would need: neither can be cut. Without a copy the only safe rewind is
to start over, and a regenerate after a 1,000-token chat prefilled all 1,000 tokens again.

So the session copies those layers at the turn boundaries a rewind goes to (where a turn starts,
right before its last prompt id where its reply starts, and where a warm-up for the message
being typed starts), as mlx-lm's server keeps prompt cache checkpoints. A copy is cheap: MLX
arrays are copied on write, so a snapshot costs memory only for what the live cache changes
after it (about 0.1 ms for 22 window layers of 512 positions). Plain `KVCache` layers are never copied: restoring trims them to the same
position (so do other caches that always trim). Only the newest few snapshots are kept (`SNAPSHOTS`), so memory stays bounded: a model
whose cache trims in place keeps none at all.

Runs on the engine thread only (it copies MLX arrays).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Sequence

import mlx.core as mx
from mlx_lm.models.cache import RotatingKVCache

SNAPSHOTS = 6  # the newest boundaries kept: two turns' starts, their replies' starts and warm-ups


@dataclass(frozen=True)
class _Snapshot:
    """The copied layers (index -> layer cache) when the cache held `position` ids."""

    position: int
    layers: dict[int, Any]


def _trims_in_place(layer: Any) -> bool:
    """A layer whose cache can always be cut back to any earlier position (a sliding window
    can only until it wraps)."""
    if isinstance(layer, RotatingKVCache):
        return False
    trimmable = getattr(layer, "is_trimmable", None)
    return bool(trimmable()) if callable(trimmable) else False


def needs_snapshots(cache: Sequence[Any]) -> bool:
    """Whether some layer of `cache` may not be trimmable back (so rewinds need snapshots)."""
    return not all(_trims_in_place(layer) for layer in cache)


def wraps_within(cache: Sequence[Any], more: int) -> bool:
    """Whether some layer cannot be trimmed once `more` ids are added: SSM state always, a
    sliding window once it has wrapped (until then it trims like any KV cache)."""
    def trims(layer: Any) -> bool:
        if isinstance(layer, RotatingKVCache):
            return bool(layer.offset + more < layer.max_size)
        return _trims_in_place(layer)
    return not all(trims(layer) for layer in cache)


class CacheSnapshots:
    """The newest snapshots of one session's cache, oldest first.

    Every kept snapshot describes a prefix of the session's current ids: the session forgets
    those past any position it rewinds to (`forget_after`) and all of them when it starts over.
    """

    def __init__(self, limit: int = SNAPSHOTS) -> None:
        self.limit = limit
        self._kept: list[_Snapshot] = []

    @property
    def positions(self) -> list[int]:
        """Where the kept snapshots stand (for tests and statistics)."""
        return [snapshot.position for snapshot in self._kept]

    def take(self, cache: Sequence[Any], position: int) -> bool:
        """Copy the layers that cannot be trimmed, at `position` ids; returns whether it did.

        Nothing is copied for an empty cache, a position already kept, or a cache that trims.
        """
        if position <= 0 or self.limit <= 0 or position in self.positions or not needs_snapshots(cache):
            return False
        layers = {i: copy.deepcopy(layer) for i, layer in enumerate(cache) if not _trims_in_place(layer)}
        mx.eval([layer.state for layer in layers.values()])  # now, not when the live cache has moved on
        self._kept = [s for s in self._kept if s.position < position] + [_Snapshot(position, layers)]
        del self._kept[: max(0, len(self._kept) - self.limit)]
        return True

    def restore(self, cache: list[Any], keep: int, held: int) -> int | None:
        """Put `cache` (holding `held` ids) back to the newest snapshot at or before `keep` ids;
        returns that snapshot's position, or None when none is kept (the caller starts over)."""
        usable = [s for s in self._kept if s.position <= keep]
        if not usable:
            return None
        snapshot = usable[-1]
        for i, layer in enumerate(cache):
            if i in snapshot.layers:
                cache[i] = copy.deepcopy(snapshot.layers[i])  # the snapshot stays for the next rewind
            else:
                layer.trim(held - snapshot.position)
        return snapshot.position

    def layers_at(self, position: int) -> dict[int, Any]:
        """The layers kept at exactly `position`, {} when none is (read only: callers copy them)."""
        return next((s.layers for s in self._kept if s.position == position), {})

    def forget_after(self, position: int) -> None:
        """Drop the snapshots past `position`: the ids after it are no longer the cache's."""
        self._kept = [s for s in self._kept if s.position <= position]

    def clear(self) -> None:
        """Drop every snapshot (the cache starts over)."""
        self._kept = []
