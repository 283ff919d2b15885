"""Forks: the tokens where the model was unsure, so the text could have gone another way.

A token is a fork when its position's entropy is above a threshold, or when the two most likely
candidates are within a margin of each other (raw probabilities: what the model thought, before
sampling). Either test can be switched off with 0. The rule is plain data, shared by the TUI
(the fork keys, the count in a reply's header, the candidates panel saying why) and anything
headless, so all of them agree on which tokens are forks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from engine.core.api import TokenEvent

ENTROPY_LIMIT = 20.0  # nats: above any real vocabulary's maximum (ln 2^28), so a typo is caught
# Measured on two small real models (temperature 0.7, two chat turns, 240 tokens each): entropy
# above 1 nat or a margin under 10 points marked 17% of gemma-3-270m's tokens and 64% of
# SmolLM2-135M's (a header saying "45 forks" of 54 tokens points nowhere); 2 nats or 5 points
# marked 6% and 35%.
DEFAULT_ENTROPY = 2.0  # nats: as unsure as a fair choice among about seven tokens
DEFAULT_MARGIN = 0.05  # the top two raw probabilities closer than 5 points


@dataclass(frozen=True)
class ForkRule:
    """When a token counts as a fork. `entropy` in nats (0 = not by entropy); `margin` in
    probability, 0 to 1 (0 = not by margin)."""

    entropy: float = DEFAULT_ENTROPY
    margin: float = DEFAULT_MARGIN

    def why(self, token: TokenEvent) -> str | None:
        """Why `token` is a fork, in a few words (None: it is not). An unknown entropy (a remote
        server's) or fewer than two candidates simply fails that test."""
        entropy = token.entropy
        if self.entropy > 0 and entropy is not None and (entropy > self.entropy or math.isnan(entropy)):
            return f"entropy {entropy:.2f} > {self.entropy:g}"
        gap = self.gap(token)
        if self.margin > 0 and gap is not None and gap < self.margin:
            return f"top two {gap * 100:.1f} points apart"
        return None

    def is_fork(self, token: TokenEvent) -> bool:
        return self.why(token) is not None

    def count(self, tokens: Iterable[TokenEvent]) -> int:
        return sum(1 for token in tokens if self.is_fork(token))

    @staticmethod
    def gap(token: TokenEvent) -> float | None:
        """Raw probability of the most likely candidate minus the second's (None: fewer than two)."""
        if len(token.candidates) < 2:
            return None
        first, second = sorted((c.logprob for c in token.candidates), reverse=True)[:2]
        return math.exp(first) - math.exp(second)

    def describe(self) -> str:
        """The rule in one line, for notes ("entropy > 1 nats or top two within 10 points")."""
        parts = ([f"entropy > {self.entropy:g} nats"] if self.entropy > 0 else []) + \
                ([f"top two within {self.margin * 100:g} points"] if self.margin > 0 else [])
        return " or ".join(parts) or "no test (both thresholds are 0)"
